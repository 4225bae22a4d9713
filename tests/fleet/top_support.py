"""A finished fleet run's log for the views' tests, made once by a real fleet against the fake model
server: two workers on two tasks, each first claims done without the file its verify checks (the stop
gate sends it back), then writes it, finishes and merges. Each test works on its own copy."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from fleet_support import ENV, readme_repo

from hilbert.commands import Runner
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer, ScriptedResponder

RUN = "r"
FINISH = {"name": "finish", "arguments": {"claim": "done", "evidence": "done.txt"}}
WRITE = {"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}


def make_fleet_run(folder: Path) -> Path:
    """Run the fleet in `folder`; the path of its event log."""
    repo = readme_repo(folder / "repo")
    script = ScriptedResponder.from_turns(
        [{"tool_calls": [FINISH]}, {"tool_calls": [WRITE]}, {"tool_calls": [FINISH]}]
    )
    tasks = tuple(Task(id=f"T{n}", title=f"task {n}", verify="test -f done.txt") for n in (1, 2))
    log = folder / "log.db"
    with FakeServer(script) as server, EventStore.open(log) as store:
        result = asyncio.run(
            run_fleet(
                Plan(goal="g", tasks=tasks),
                repo=repo,
                root=folder / "run",
                run=RUN,
                model=make_model(f"openai:fake@{server.openai_base_url}", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                # its model goes through no governor: the log says so (`top` shows none for it)
                settings=Settings.of(
                    {"fleet.workers": 2, "commands.test": "true", "governor.enabled": False}
                ),
            )
        )
    assert result.all_done, result.states
    return log


def copy_log(log: Path, to: Path) -> Path:
    """A copy of the log at `to` (the SQLite backup API: the WAL's last commits included)."""
    with sqlite3.connect(log) as source, sqlite3.connect(to) as copy:
        source.backup(copy)
    return to
