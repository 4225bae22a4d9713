"""A fleet whose engine's KV cache is full (`[governor] kv_cache_max`, the fake server's `/metrics`): its
workers wait to start their attempts, the wait in the log, and start once the cache has room."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from fleet_support import ENV, readme_repo

from hilbert.commands import Runner
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer, ScriptedResponder


def test_a_fleets_attempts_wait_while_the_engines_kv_cache_is_full(tmp_path: Path) -> None:
    script = ScriptedResponder.from_turns(
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}]},
            {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "done.txt"}}]},
        ]
    )
    tasks = (
        Task(id="T1", title="one", verify="test -f done.txt"),
        Task(id="T2", title="two", verify="test -f done.txt"),
    )
    repo = readme_repo(tmp_path / "repo")
    outcome: list[Any] = []
    with FakeServer(script) as server, EventStore.open(tmp_path / "log.db") as store:
        server.app.kv_cache_usage = 0.95  # the engine is full

        def fleet() -> None:
            outcome.append(
                asyncio.run(
                    run_fleet(
                        Plan(goal="g", tasks=tasks), repo=repo, root=tmp_path / "run", run="kv",
                        model=make_model(f"openai:fake@{server.openai_base_url}", env={}), store=store,
                        runner=Runner.unsandboxed(ENV),
                        settings=Settings.of(
                            {"fleet.workers": 2, "commands.test": "true", "governor.kv_cache_max": 0.9,
                             "governor.kv_cache_poll_s": 0.1}
                        ),
                    )
                )
            )  # fmt: skip

        running = threading.Thread(target=fleet, daemon=True)
        running.start()
        deadline = time.monotonic() + 60
        while len(store.events(run="kv", kinds=["admission_waiting"])) < 2:
            assert time.monotonic() < deadline and running.is_alive(), "the workers never waited"
            time.sleep(0.05)
        assert store.events(run="kv", kinds=["task_started", "model_call"]) == []  # nothing started
        server.app.kv_cache_usage = 0.3  # the engine has room again
        running.join(timeout=120)
        events = store.events(run="kv")
    assert not running.is_alive() and outcome and outcome[0].all_done
    waits = [e for e in events if e.kind == "admission_waiting"]
    assert {(e.data["task"], e.data["usage"], e.data["limit"]) for e in waits} == {
        ("T1", 0.95, 0.9),
        ("T2", 0.95, 0.9),
    }
    assert {e.data["gauge"] for e in waits} == {"vllm:kv_cache_usage_perc"}
    for task in ("T1", "T2"):
        kinds = [
            e.kind
            for e in events
            if e.data.get("task") == task and e.kind.startswith(("admission", "task_started"))
        ]
        assert kinds == ["admission_waiting", "admission_granted", "task_started"], (task, kinds)
