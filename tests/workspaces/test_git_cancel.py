"""A git command whose caller is cancelled is killed and reaped, never left running unwatched (a fleet
cancels work when a worker hangs or the run stops; pytest turns a leaked subprocess into an error)."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import pytest

from hilbert.workspaces.git import Git


def test_a_cancelled_git_command_is_killed_and_reaped(tmp_path: Path) -> None:
    async def main() -> float:
        git = Git(home=tmp_path)
        slow = asyncio.create_task(git.run("-c", "alias.nap=!sleep 30", "nap", cwd=tmp_path))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        return time.monotonic() - started

    assert asyncio.run(main()) < 5
    gc.collect()  # a Process left running would warn here (warnings are errors in this suite)
