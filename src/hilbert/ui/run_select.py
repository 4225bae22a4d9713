"""Which run a command is about: `open_run(db, run)` opens the event log (`--db`, else the settings'
log under `HILBERT_HOME`) and names the run — the one given, else the latest as `hilbert status` picks
it (the one live fleet run, else the newest still going, else the newest of any kind). Bad input is one
line (`UserError`). Shared by the fleet's commands (`hilbert.ui.cli`) and `hilbert report`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hilbert.errors import UserError
from hilbert.settings import Settings


@contextlib.contextmanager
def open_run(db: Path | None, run_id: str | None) -> Iterator[tuple[Any, str]]:
    """The event log and the run a fleet command is about (the latest unless named)."""
    from hilbert.store import EventStore

    settings = Settings.load({"db": db})
    if not settings.db_path.exists():
        raise UserError(f"no event log at {settings.db_path}", hint="start a run first, or pass --db")
    with EventStore.open(settings.db_path) as store:
        runs = store.runs()
        if not runs or (run_id is not None and run_id not in runs):
            raise UserError(
                f"no run {run_id or ''} in {settings.db_path}".replace("  ", " "),
                hint=f"known runs: {', '.join(runs[-5:]) or 'none'}",
            )
        yield store, run_id or _latest(store, runs)


def _latest(store: Any, runs: list[str]) -> str:
    """The one live fleet run, else the newest fleet run still going, else the newest run of any kind.
    Two live runs or more: refused (one line naming them), never a silent pick of the newer."""
    from hilbert.fleet.state import Fold

    going = {e.run for e in store.events(kinds=["fleet_started"])} - {
        e.run for e in store.events(kinds=["fleet_finished"])
    }
    # live, or on another host (cannot tell): either could be the one meant
    live = [run for run in runs if run in going and Fold(store, run).catch_up().process_alive() is not False]
    if len(live) > 1:
        raise UserError(
            f"{len(live)} runs may be live: {', '.join(live)}",
            hint="name one with --run RUN (`hilbert runs` lists them)",
        )
    if live:
        return live[0]
    return next((run for run in reversed(runs) if run in going), runs[-1])
