"""A stand-in for `hilbert run` that the leftovers tests SIGKILL: it runs commands through a real
`Runner` with the run's mark until it is killed.

    python dying_run.py KIND WORKSPACE MARK COMMAND...

KIND is bubblewrap, landlock or unsandboxed; each COMMAND runs at once, side by side, with WORKSPACE its
one writable folder and a timeout far past any test. If they all end, it prints how each ended.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hilbert.commands import Runner, Timeout, command_env
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import Sandbox, detect


def sandbox(kind: str) -> Sandbox:
    if kind == "unsandboxed":
        return Sandbox("unsandboxed")
    found = detect(which=lambda name: None, network=abi_version() < 4) if kind == "landlock" else detect()
    if found.kind != kind:
        raise SystemExit(f"no {kind} here: {found.why}")
    return found


async def main(kind: str, workspace: Path, mark: str, commands: list[str]) -> None:
    runner = Runner(sandbox(kind), command_env()).marked(mark)
    timeout = Timeout(3600, "test")
    ran = await asyncio.gather(
        *(runner.run(command, root=workspace, timeout=timeout) for command in commands)
    )
    for each in ran:
        print(each.status())


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4:]))
