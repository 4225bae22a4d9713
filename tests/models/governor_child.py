"""A hilbert process making one model call through the machine's governor, for
`test_governor_processes.py`: `python governor_child.py HOME URL [MAX_CONCURRENCY]`. It builds its models
as the CLI does (`hilbert.ui.edge.Models`, hilbert's home HOME), says `ready` on stdout once its imports
are done, waits for a line on stdin, makes one call on `anthropic:fake-claude@URL` (the key comes from
ANTHROPIC_API_KEY) with one try, and prints `done ATTEMPTS` or `error MESSAGE`."""

from __future__ import annotations

import asyncio
import sys

import hilbert.models.wire  # noqa: F401  (the SDKs: imported before `ready`, not while the clock runs)
from hilbert.errors import HilbertError
from hilbert.models.types import Message
from hilbert.settings import Settings
from hilbert.ui.edge import Models


async def main(home: str, url: str, concurrency: str) -> int:
    settings = Settings.load(
        {"home": home, "governor.max_concurrency": int(concurrency), "budgets.model_max_attempts": 1},
        env={"HILBERT_CONFIG": "/nonexistent"},
    )
    model = Models(settings).named(f"anthropic:fake-claude@{url}")
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        reply = await model.complete([Message("user", "Fix the failing test.")])
    except HilbertError as error:
        print(f"error {error}", flush=True)
        return 1
    print(f"done {reply.attempts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
