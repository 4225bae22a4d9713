"""The loop: model call, tool calls, events, policies — over the real wire to a scripted fake server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from hilbert.agent.loop import AgentResult, run_agent
from hilbert.agent.policies import Action, Halt, Inject, LoopState, Policy, Resume, Stop, TurnLimit
from hilbert.agent.tools import ToolBox, ToolOutcome
from hilbert.commands import Runner
from hilbert.models import make_model
from hilbert.models.types import Message, ToolCall
from hilbert.store import EventStore, rebuild_conversation
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responders import ScriptedResponder

TURNS = [
    {
        "text": "Looking around.",
        "tool_calls": [
            {"name": "list_files", "arguments": {}},
            {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello\n"}},
        ],
    },
    {"tool_calls": [{"name": "shell", "arguments": {"command": "cat notes.txt"}}]},
    {
        "tool_calls": [
            {"name": "finish", "arguments": {"claim": "wrote notes", "evidence": "cat shows hello"}}
        ]
    },
]


def run(
    tmp_path: Path,
    turns: list,
    policies: Sequence[Policy],
    *,
    protocol: str = "anthropic",
    faults: str | None = None,
    max_attempts: int = 6,
) -> tuple[AgentResult, EventStore, FakeServer]:
    """One agent over `protocol` against a scripted fake server; its result, log and server."""
    store = EventStore.open(tmp_path / "log.db")
    with FakeServer(ScriptedResponder.from_turns(turns), faults=faults) as server:
        base = server.openai_base_url if protocol.startswith("openai") else server.base_url
        model = make_model(f"{protocol}:fake@{base}", env={}, max_attempts=max_attempts)
        result = asyncio.run(
            run_agent(
                run="r",
                agent="Euler",
                task="write notes",
                model=model,
                toolbox=ToolBox(tmp_path / "ws", runner=Runner.unsandboxed()),
                store=store,
                policies=policies,
            )
        )
    return result, store, server


def test_tool_calls_run_and_every_step_is_logged(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    result, store, server = run(tmp_path, TURNS, [TurnLimit(10)])
    assert (result.status, result.claim, result.turns) == ("finished", "wrote notes", 3)
    assert (tmp_path / "ws" / "notes.txt").read_text() == "hello\n"
    events = store.events(run="r")
    assert [e.kind for e in events] == [
        "agent_started",
        "model_call",
        "tool_result",
        "tool_result",
        "model_call",
        "tool_result",
        "model_call",
        "tool_result",
        "agent_stopped",
    ]
    shell = next(e for e in events if e.kind == "tool_result" and e.data["name"] == "shell")
    assert store.get_messages([shell.data["message"]])[0].content == "[exit 0]\nhello\n"
    # what the server received on the last call is what the log says was sent
    assert len(server.requests) == 3
    sent = store.get_messages(events[6].data["request"])
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert rebuild_conversation(store, "r", "Euler")[-1].content.startswith("finish recorded")
    assert result.usage.input_tokens > 0 and result.usage.cache_read_tokens > 0


def test_turn_limit_halts_and_is_logged(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    result, store, _ = run(tmp_path, TURNS, [TurnLimit(2)])
    assert result.status == "halted" and "turn limit" in result.reason and result.turns == 2
    action = store.events(run="r", kinds=["policy_action"])[0]
    assert action.data["policy"] == "turn_limit"
    ran = [e.data["name"] for e in store.events(run="r", kinds=["tool_result"])]
    assert ran == ["list_files", "write_file", "shell"]  # turns 1 and 2 ran; turn 3 (finish) never did


class SendBackOnce(Policy):
    """Refuses the first finish with feedback (what the judge will do), accepts the second."""

    name = "send_back"

    def __init__(self) -> None:
        self.sent_back = False

    def on_stop(self, state: LoopState, stop: Stop) -> Sequence[Action]:
        if stop.status == "finished" and not self.sent_back:
            self.sent_back = True
            return [Resume(Message("user", "Not done: also run the tests."))]
        return ()


class Remind(Policy):
    name = "remind"

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        return [Inject(Message("user", "Reminder: run the check."))] if state.turns == 1 else ()


def test_policies_can_resume_a_stop_and_inject_messages(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    finish = {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "-"}}]}
    result, store, server = run(
        tmp_path, [TURNS[0], finish, finish], [SendBackOnce(), Remind(), TurnLimit(10)]
    )
    assert result.status == "finished" and result.turns == 3
    injected = store.events(run="r", kinds=["message_injected"])
    assert [(e.data["by"], e.data["action"]) for e in injected] == [
        ("remind", "inject"),
        ("send_back", "resume"),
    ]
    last_request = server.requests[-1]["body"]["messages"]
    assert "Not done: also run the tests." in str(last_request[-1])
    assert "Reminder: run the check." in str(last_request)


def test_a_reply_without_tool_calls_stops_without_finish(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    result, _, _ = run(tmp_path, ["I am done, trust me."], [TurnLimit(10)])
    assert result.status == "no_finish" and result.turns == 1


def test_a_model_that_keeps_failing_stops_the_agent_with_an_error(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    result, store, _ = run(tmp_path, TURNS, [], protocol="openai", faults="500=1.0", max_attempts=2)
    assert result.status == "error" and "500" in result.reason
    assert [e.kind for e in store.events(run="r")] == ["agent_started", "model_error", "agent_stopped"]


class HaltAfterFirstTool(Policy):
    name = "stop_now"

    def after_tool_call(self, state: LoopState, call: ToolCall, outcome: ToolOutcome) -> Sequence[Action]:
        return [Halt("the person said stop")]


def test_a_halt_mid_turn_runs_nothing_more_and_answers_every_call(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    turn = {
        "tool_calls": [
            {"name": "shell", "arguments": {"command": "true"}},
            {"name": "write_file", "arguments": {"path": "after_halt.txt", "content": "x"}},
            {"name": "finish", "arguments": {"claim": "done", "evidence": "-"}},
        ]
    }
    result, store, server = run(tmp_path, [turn, turn], [HaltAfterFirstTool(), SendBackOnce()])
    assert result.status == "halted" and result.reason == "the person said stop" and result.turns == 1
    assert not (tmp_path / "ws" / "after_halt.txt").exists()
    results = store.events(run="r", kinds=["tool_result"])
    assert [r.data["is_error"] for r in results] == [False, True, True]
    assert len(server.requests) == 1


def test_finish_needs_a_claim_and_evidence(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    bad = {"tool_calls": [{"name": "finish", "arguments": {}}]}
    broken = {"tool_calls": [{"name": "finish", "arguments": "{claim: oops"}]}
    good = {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "ran it"}}]}
    blank = {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "  "}}]}
    result, store, _ = run(tmp_path, [bad, broken, blank, good], [TurnLimit(10)])
    assert (result.status, result.claim, result.turns) == ("finished", "done", 4)
    errors = [e.data["is_error"] for e in store.events(run="r", kinds=["tool_result"])]
    assert errors == [True, True, True, False]


def test_finish_with_other_calls_runs_them_and_the_first_finish_counts(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    turn = {
        "tool_calls": [
            {"name": "finish", "arguments": {"claim": "first", "evidence": "-"}},
            {"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}},
            {"name": "finish", "arguments": {"claim": "second", "evidence": "-"}},
        ]
    }
    result, store, _ = run(tmp_path, [turn], [TurnLimit(10)])
    assert result.claim == "first" and (tmp_path / "ws" / "a.txt").exists()
    assert [e.data["is_error"] for e in store.events(run="r", kinds=["tool_result"])] == [False, False, True]


class NoteAfterEachTool(Policy):
    name = "note"

    def after_tool_call(self, state: LoopState, call: ToolCall, outcome: ToolOutcome) -> Sequence[Action]:
        return [Inject(Message("user", f"note about {call.id}"))]


@pytest.mark.parametrize("protocol", ["openai", "openai-responses", "anthropic"])
def test_messages_injected_during_a_turn_follow_all_its_tool_results(tmp_path: Path, protocol: str) -> None:
    """The real APIs refuse a message between tool results; the fake server refuses it too."""
    (tmp_path / "ws").mkdir()
    result, store, _ = run(tmp_path, TURNS, [NoteAfterEachTool()], protocol=protocol, max_attempts=1)
    assert result.status == "finished", result.reason
    sent = store.get_messages(store.events(run="r", kinds=["model_call"])[1].data["request"])
    assert [m.role for m in sent[2:]] == ["assistant", "tool", "tool", "user", "user"]


def test_the_fake_server_refuses_a_message_between_tool_results(tmp_path: Path) -> None:
    from hilbert.errors import RefusedError

    call = ToolCall(id="c1", name="shell", arguments={"command": "true"})
    bad = [
        Message("user", "go"),
        Message("assistant", "", tool_calls=(call,)),
        Message("user", "interrupting"),
        Message("tool", "[exit 0]", tool_call_id="c1", name="shell"),
    ]
    with FakeServer(ScriptedResponder.from_turns(TURNS)) as server:
        model = make_model(f"openai:fake@{server.openai_base_url}", env={}, max_attempts=1)
        with pytest.raises(RefusedError, match="must be answered"):
            asyncio.run(model.complete(bad))


def test_an_interrupted_run_still_says_how_it_ended(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    slow = {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]}
    store = EventStore.open(tmp_path / "log.db")

    async def main() -> None:
        with FakeServer(ScriptedResponder.from_turns([slow])) as server:
            model = make_model(f"anthropic:fake@{server.base_url}", env={})
            task = asyncio.create_task(
                run_agent(
                    run="r",
                    agent="Euler",
                    task="t",
                    model=model,
                    store=store,
                    toolbox=ToolBox(tmp_path / "ws", runner=Runner.unsandboxed()),
                )
            )
            while not store.events(run="r", kinds=["model_call"]):
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    stopped = store.events(run="r", kinds=["agent_stopped"])
    assert [e.data["status"] for e in stopped] == ["interrupted"]


class NoteThenHalt(Policy):
    name = "note_then_halt"

    def after_tool_call(self, state: LoopState, call: ToolCall, outcome: ToolOutcome) -> Sequence[Action]:
        return [Inject(Message("user", "stopping you")), Halt("enough")]


def test_a_halt_with_a_note_mid_turn_keeps_the_tool_results_together(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    result, store, _ = run(tmp_path, [TURNS[0]], [NoteThenHalt()])
    assert result.status == "halted"
    roles = [m.role for m in rebuild_conversation(store, "r", "Euler")]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]


class SlowJudge(Policy):
    """An async hook (it awaits I/O, as a verify run does) sends the first finish back."""

    name = "slow_judge"

    def __init__(self) -> None:
        self.calls = 0

    async def on_stop(self, state: LoopState, stop: Stop) -> Sequence[Action]:
        self.calls += 1
        await asyncio.sleep(0.01)
        return [Resume(Message("user", "checked: not yet"))] if self.calls == 1 else []


def test_async_policy_hooks_are_awaited(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    finish = {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "-"}}]}
    judge = SlowJudge()
    result, store, _ = run(tmp_path, [finish, finish], [judge])
    assert result.status == "finished" and result.turns == 2 and judge.calls == 2
    assert [e.data["by"] for e in store.events(run="r", kinds=["message_injected"])] == ["slow_judge"]


def test_a_shared_cost_pool_halts_every_agent_that_shares_it(tmp_path: Path) -> None:
    from hilbert.agent.policies import CostPool, SharedCostLimit
    from hilbert.models import PriceTable

    (tmp_path / "ws").mkdir()
    pool = CostPool(max_usd=0.01)
    prices = PriceTable.default().with_overrides({"fake": {"input": 5.0, "output": 5.0}})  # $5 per Mtok
    looping = [{"tool_calls": [{"name": "list_files", "arguments": {}}]}] * 40

    async def main() -> list[AgentResult]:
        with (
            FakeServer(ScriptedResponder.from_turns(looping)) as server,
            EventStore.open(tmp_path / "l.db") as store,
        ):
            model = make_model(f"anthropic:fake@{server.base_url}", env={}, prices=prices)
            return await asyncio.gather(
                *(
                    run_agent(
                        run="r",
                        agent=name,
                        task="t",
                        model=model,
                        store=store,
                        toolbox=ToolBox(tmp_path / "ws", runner=Runner.unsandboxed()),
                        policies=[SharedCostLimit(pool), TurnLimit(40)],
                    )
                    for name in ("Euler", "Gauss")
                )
            )

    results = asyncio.run(main())
    assert all(r.status == "halted" and "cost cap" in r.reason for r in results)
    assert 0.01 <= pool.spent_usd < 0.02 and all(r.turns < 40 for r in results)
