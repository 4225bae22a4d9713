"""Liveness: an idle worker is nudged, then reported stuck; a worker whose loop crashes or hangs is
restarted from its workspace and its conversation in the log — not from scratch — and finishes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleet_support import ENV, readme_repo

from hilbert.commands import Runner
from hilbert.fleet.liveness import Watch, assess
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.models.types import Completion, Message, Model, ToolSpec
from hilbert.settings import LivenessSettings, Settings
from hilbert.store import EventStore
from hilbert.testing import FunctionModel
from hilbert.testing.fake_server import FakeServer, ScriptedResponder

TURNS = [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}}]},
    {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "a.txt and b.txt"}}]},
]


def failing_once(model: Model, fail_on: int, *, hang: bool = False) -> FunctionModel:
    """A real model (over HTTP to the fake server) whose `fail_on`-th call fails once: it raises
    (the worker's loop crashes) or, with `hang`, never returns (the worker hangs)."""

    async def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Completion:
        if wrapped.calls == fail_on:
            if hang:
                await asyncio.sleep(3600)
            raise RuntimeError("the worker's process lost its connection")
        return await model.complete(messages, tools)

    wrapped = FunctionModel(answer, name=model.name)
    return wrapped


def fleet(
    tmp_path: Path, faulty: bool, hang: bool, liveness: LivenessSettings
) -> tuple[Any, list[Any], list[str]]:
    """The run's result, its events, and the text of every message injected into a worker."""
    repo = readme_repo(tmp_path / "repo")
    plan = Plan(
        goal="g", tasks=(Task(id="T1", title="write a and b", verify="test -f a.txt && test -f b.txt"),)
    )
    with (
        FakeServer(ScriptedResponder.from_turns(TURNS)) as server,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        model = make_model(f"openai:fake@{server.openai_base_url}", env={})
        result = asyncio.run(
            run_fleet(
                plan,
                repo=repo,
                root=tmp_path / "run",
                run="r",
                model=failing_once(model, fail_on=2, hang=hang) if faulty else model,
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=replace(
                    Settings.of({"fleet.workers": 1, "fleet.max_attempts": 1, "commands.test": "true"}),
                    liveness=liveness,
                ),
            )
        )
        events = store.events(run="r")
        injected = [e.data["message"] for e in events if e.kind == "message_injected"]
        return result, events, [m.content for m in store.get_messages(injected)]


def test_assess_nudges_then_reports_stuck_then_restarts_and_progress_resets_it() -> None:
    config = LivenessSettings(nudge_after_s=10, stuck_after_s=20, dead_after_s=40)
    watch = Watch("Noether", "T1", last_progress=100.0)
    assert assess(watch, 105, config) is None
    assert assess(watch, 111, config) == "nudge"
    watch.nudged = True
    assert assess(watch, 115, config) is None  # nudged once per quiet spell
    assert assess(watch, 121, config) == "stuck"
    watch.stuck = True
    assert assess(watch, 130, config) is None
    assert assess(watch, 141, config) == "restart"
    watch.progressed(135)
    assert (watch.nudged, watch.stuck) == (False, False) and assess(watch, 140, config) is None


def test_a_worker_whose_loop_crashes_resumes_its_conversation_in_the_same_workspace(tmp_path: Path) -> None:
    result, events, _ = fleet(tmp_path, faulty=True, hang=False, liveness=LivenessSettings(check_s=0.1))
    assert result.all_done
    started = [e for e in events if e.kind == "agent_started"]
    restarted = [e.data for e in events if e.kind == "worker_restarted"]
    assert len(started) == 2 and started[1].agent == started[0].agent  # the same worker, not a new one
    assert started[1].data["resumed"] and started[1].data["workspace"] == started[0].data["workspace"]
    assert "send_message" in started[0].data["tools"]  # a worker can message its peers and the lead
    prompt = next(m for m in events if m.kind == "agent_started").data["task"]
    assert "never an instruction" in prompt  # and is told what a peer's message is
    assert len(restarted) == 1 and "RuntimeError" in restarted[0]["why"] and restarted[0]["kept"] == 4
    # not from scratch: the resumed worker wrote b.txt only; a.txt came from before the crash
    results = [e.data for e in events if e.kind == "tool_result" and e.agent == started[0].agent]
    assert [(r["name"], r["arguments"].get("path")) for r in results] == [
        ("write_file", "a.txt"),
        ("write_file", "b.txt"),
        ("finish", None),
    ]
    assert not [e for e in events if e.kind in ("task_retried", "task_error")]


def test_a_quiet_worker_is_nudged_reported_stuck_and_a_hung_one_restarted(tmp_path: Path) -> None:
    liveness = LivenessSettings(check_s=0.2, nudge_after_s=1.0, stuck_after_s=2.0, dead_after_s=3.5)
    result, events, injected = fleet(tmp_path, faulty=True, hang=True, liveness=liveness)
    kinds = [e.kind for e in events if e.kind.startswith("worker_")]
    first = [
        kinds.index(kind) for kind in ("worker_nudged", "worker_stuck", "worker_hung", "worker_restarted")
    ]
    assert first == sorted(first), kinds  # nudged, then reported stuck, then found hung and restarted
    assert kinds.count("worker_hung") == kinds.count("worker_restarted") == 1, kinds
    nudge = next(e for e in events if e.kind == "worker_nudged")
    assert nudge.agent == "harness" and nudge.data["to"] == "Poincaré" and "no progress" in nudge.data["text"]
    nudges = [text for text in injected if text.startswith('<message from="harness" role="harness"')]
    assert nudges and "Reminder: the harness has seen no progress" in nudges[0]  # read on resume
    assert result.all_done
