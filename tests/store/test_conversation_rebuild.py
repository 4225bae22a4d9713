"""`rebuild_conversation` and `agent_summary` against a synthetic log written the way the loop writes it.

The writer below keeps the conversation in memory exactly as the agent loop does and records, after
every event, what the conversation is; the rebuild from the log must equal it at every point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hilbert.errors import UserError
from hilbert.models.types import Message, ToolCall, Usage
from hilbert.store import EventStore, agent_summary, rebuild_conversation


class LoopLikeWriter:
    """Writes one agent's events and remembers the in-memory conversation after each."""

    def __init__(self, store: EventStore, run: str, agent: str) -> None:
        self.store, self.run, self.agent = store, run, agent
        self.conversation: list[Message] = []
        self.after: dict[int, list[Message]] = {}  # event id -> conversation after it

    def record(self, kind: str, data: dict[str, Any]) -> None:
        event = self.store.append(self.run, self.agent, kind, data)
        self.after[event.id] = list(self.conversation)

    def start(self, task: str) -> None:
        self.conversation = [Message("system", f"You are {self.agent}."), Message("user", task)]
        self.record(
            "agent_started",
            {
                "task": task,
                "model": "fake:m",
                "workspace": "/w",
                "tools": ["shell"],
                "messages": self.store.put_messages(self.conversation),
            },
        )

    def model_call(self, reply: Message, *, sent: list[Message] | None = None, cost: float = 0.01) -> None:
        sent = list(self.conversation) if sent is None else sent  # `sent` differs when compacted
        self.conversation = [*sent, reply]
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_read_tokens": 60, "cache_write_tokens": 5}
        self.record(
            "model_call",
            {
                "request": self.store.put_messages(sent),
                "tools": ["shell"],
                "response": self.store.put_messages([reply])[0],
                "usage": usage,
                "cost_usd": cost,
                "latency_s": 0.5,
                "ttft_s": 0.1,
                "stop_reason": "tool_use",
                "model": "m-2025",
                "attempts": 1,
            },
        )

    def tool_result(self, call_id: str, output: str, *, is_error: bool = False) -> None:
        message = Message("tool", output, tool_call_id=call_id, name="shell", is_error=is_error)
        self.conversation.append(message)
        self.record(
            "tool_result",
            {
                "call_id": call_id,
                "name": "shell",
                "arguments": {"command": "ls"},
                "message": self.store.put_messages([message])[0],
                "is_error": is_error,
                "duration_s": 0.1,
            },
        )

    def inject(self, text: str, by: str) -> None:
        message = Message("user", text)
        self.conversation.append(message)
        self.record("message_injected", {"message": self.store.put_messages([message])[0], "by": by})


def call(call_id: str) -> ToolCall:
    return ToolCall(call_id, "shell", {"command": "ls"})


def write_story(store: EventStore) -> tuple[LoopLikeWriter, LoopLikeWriter]:
    alice, bob = LoopLikeWriter(store, "r", "alice"), LoopLikeWriter(store, "r", "bob")
    alice.start("fix the bug")
    bob.start("write docs")
    alice.model_call(Message("assistant", "looking", tool_calls=(call("a1"), call("a2"))))
    alice.tool_result("a1", "file.py")
    bob.model_call(Message("assistant", "", tool_calls=(call("b1"),)))
    alice.tool_result("a2", "boom", is_error=True)
    alice.inject("Reminder: run the tests.", by="reminder")
    store.append("r", "alice", "model_error", {"error": "RateLimitError", "message": "slow down"})
    alice.model_call(Message("assistant", "again", tool_calls=(call("a3"),)))
    bob.tool_result("b1", "README.md")
    alice.tool_result("a3", "ok")
    # A compacted call: the loop sends a shorter history; the conversation becomes exactly that + reply.
    compacted = [
        alice.conversation[0],
        Message("user", "Summary so far: fixed half."),
        alice.conversation[-1],
    ]
    alice.model_call(
        Message("assistant", "done", tool_calls=(ToolCall("f", "finish", {"claim": "fixed"}),)),
        sent=compacted,
    )
    alice.tool_result("f", "finish recorded")
    store.append(
        "r", "alice", "agent_stopped", {"status": "finished", "claim": "fixed", "turns": 3, "cost_usd": 0.03}
    )
    return alice, bob


def test_rebuild_equals_the_writers_conversation_after_every_event(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "events.db") as store:
        alice, bob = write_story(store)
        for writer in (alice, bob):
            for event_id, expected in writer.after.items():
                assert rebuild_conversation(store, "r", writer.agent, upto_id=event_id) == expected
            assert rebuild_conversation(store, "r", writer.agent) == writer.conversation
        final = rebuild_conversation(store, "r", "alice")
        assert [m.content for m in final] == [
            "You are alice.",
            "Summary so far: fixed half.",
            "ok",
            "done",
            "finish recorded",
        ]
        # At any point of the log (another agent's event, a model_error, the stop) the rebuild is
        # the conversation after the agent's last conversation event before it.
        for event in store.events():
            if event.id >= min(alice.after):
                latest = max(i for i in alice.after if i <= event.id)
                assert rebuild_conversation(store, "r", "alice", upto_id=event.id) == alice.after[latest]


def test_rebuild_of_an_unknown_agent_is_a_user_error(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "events.db") as store:
        write_story(store)
        with pytest.raises(UserError, match="no agent 'carol'"):
            rebuild_conversation(store, "r", "carol")
        with pytest.raises(UserError):
            rebuild_conversation(store, "r", "bob", upto_id=1)  # bob's first event comes later


def test_agent_summary_is_derived_from_events(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "events.db") as store:
        alice = LoopLikeWriter(store, "r", "alice")
        alice.start("fix the bug")
        alice.model_call(Message("assistant", "x", tool_calls=(call("a1"),)), cost=0.25)
        alice.tool_result("a1", "boom", is_error=True)
        running = agent_summary(store, "r", "alice")
        assert (running.status, running.turns, running.tool_calls, running.tool_errors) == (
            "running",
            1,
            1,
            1,
        )
        assert running.task == "fix the bug" and running.model == "fake:m"
        assert running.claim is None

        write_story(store)  # appends to alice (restarted) and bob in the same run
        done = agent_summary(store, "r", "alice")
        assert done.status == "finished" and done.claim == "fixed"
        assert done.turns == 4 and done.tool_calls == 5 and done.tool_errors == 2
        assert done.model_errors == 1 and done.injected == 1
        assert done.usage == Usage(400, 40, 240, 20)
        assert done.cost_usd == pytest.approx(0.25 + 3 * 0.01)
        assert done.started_at <= done.last_event_at
        assert agent_summary(store, "r", "bob").status == "running"
        with pytest.raises(UserError):
            agent_summary(store, "r", "carol")


def test_every_turn_keeps_what_a_compaction_dropped_in_order(tmp_path: Path) -> None:
    from hilbert.store import every_turn

    with EventStore.open(tmp_path / "events.db") as store:
        write_story(store)
        contents = [m.content for m in every_turn(store, "r", "alice")]
    assert contents == [
        "You are alice.",
        "fix the bug",
        "looking",
        "file.py",
        "boom",
        "Reminder: run the tests.",
        "again",
        "ok",
        "done",  # the compacted call's summary was sent, not said: not a turn of the agent's
        "finish recorded",
    ]
