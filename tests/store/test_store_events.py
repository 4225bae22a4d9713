"""Appending and reading events and message blobs within one process."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from pathlib import Path

import pytest

from hilbert.errors import RunError, UserError
from hilbert.models.types import Message, ToolCall
from hilbert.store import Event, EventStore
from hilbert.store.blobs import content_hash


def test_appended_events_read_back_with_per_agent_seq(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "events.db") as store:
        written = [
            store.append("r1", "alice", "agent_started", {"task": "t", "tools": ["shell"]}),
            store.append("r1", "bob", "agent_started", {"task": "u"}),
            store.append("r1", "alice", "model_call", {"cost_usd": 0.5, "nested": {"a": [1, 2]}}),
            store.append("r2", "alice", "agent_started", {"task": "v"}),
            store.append("r1", "alice", "agent_stopped", {"status": "finished"}),
        ]
        assert [(e.run, e.agent, e.seq) for e in written] == [
            ("r1", "alice", 1),
            ("r1", "bob", 1),
            ("r1", "alice", 2),
            ("r2", "alice", 1),
            ("r1", "alice", 3),
        ]
        assert [e.id for e in written] == sorted({e.id for e in written})
        assert all(a.time <= b.time for a, b in itertools.pairwise(written))
        assert store.events() == written
        assert store.events(run="r1", agent="alice") == [written[0], written[2], written[4]]
        assert store.events(kinds=["agent_started"]) == [written[0], written[1], written[3]]
        assert store.events(kinds="agent_stopped") == [written[4]]
        assert store.events(kinds=[]) == []
        assert store.events(after_id=written[1].id, upto_id=written[3].id) == written[2:4]
        assert store.events(limit=2) == written[:2]
        assert store.runs() == ["r1", "r2"]
        assert store.agents("r1") == ["alice", "bob"]
        assert store.agents("nope") == []
        assert store.last_id() == written[-1].id
        assert store.count(run="r1", agent="alice", kind="model_call") == 1
        assert store.count(run="r1", agent="alice", kind="model_call", upto_id=written[1].id) == 0


def test_an_event_is_visible_to_another_connection_when_append_returns(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    with EventStore.open(path) as writer, EventStore.open(path) as reader:
        event = writer.append("r", "a", "k", {"x": "ü"})
        assert reader.events() == [event]
        assert reader.last_id() == event.id


def test_empty_store_and_bad_data(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "events.db") as store:
        assert store.events() == [] and store.runs() == [] and store.last_id() == 0
        with pytest.raises(TypeError):
            store.append("r", "a", "k", ["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            store.append("r", "a", "k", {"not json": object()})
        assert store.events() == []  # a failed append leaves nothing behind
        assert store.append("r", "a", "k", {}).seq == 1


@pytest.mark.parametrize(("durability", "pragma"), [("normal", 1), ("full", 2)])
def test_durability_sets_synchronous(tmp_path: Path, durability: str, pragma: int) -> None:
    with EventStore.open(tmp_path / "events.db", durability=durability) as store:  # type: ignore[arg-type]
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == pragma
        store.append("r", "a", "k", {})
        assert len(store.events()) == 1


def test_unknown_durability_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="durability"):
        EventStore.open(tmp_path / "events.db", durability="sometimes")  # type: ignore[arg-type]


def test_messages_round_trip_in_order_with_repeats(tmp_path: Path) -> None:
    messages = [
        Message("system", "be brief"),
        Message("user", "hi ✓"),
        Message(
            "assistant",
            "",
            tool_calls=(ToolCall("c1", "shell", {"command": "ls"}), ToolCall("c2", "x", {}, "{")),
        ),
        Message("tool", "a\nb", tool_call_id="c1", name="shell", is_error=True),
    ]
    with EventStore.open(tmp_path / "events.db") as store:
        hashes = store.put_messages(messages)
        assert hashes == [content_hash(m.to_json()) for m in messages]
        assert len(set(hashes)) == 4
        assert store.get_messages([hashes[3], hashes[0], hashes[3]]) == [
            messages[3],
            messages[0],
            messages[3],
        ]
        assert store.get_messages([]) == []
        assert store.put_messages([]) == []


def test_a_missing_blob_is_a_run_error(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "events.db") as store, pytest.raises(RunError, match="no message blob"):
        store.get_messages(["0" * 64])


def test_history_shared_by_100_model_calls_is_stored_once(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    conversation = [Message("system", "sys " * 200), Message("user", "the task " * 200)]
    with EventStore.open(path) as store:
        store.append("r", "a", "agent_started", {"messages": store.put_messages(conversation)})
        for turn in range(100):
            reply = Message(
                "assistant", f"turn {turn}", tool_calls=(ToolCall(f"c{turn}", "shell", {"command": "ls"}),)
            )
            request = store.put_messages(conversation)
            store.append(
                "r", "a", "model_call", {"request": request, "response": store.put_messages([reply])[0]}
            )
            result = Message("tool", f"output {turn} " * 50, tool_call_id=f"c{turn}", name="shell")
            store.append("r", "a", "tool_result", {"message": store.put_messages([result])[0]})
            conversation += [reply, result]
        last = store.events(kinds=["model_call"])[-1]
        assert len(last.data["request"]) == 200  # the last call sent 200 messages …
        assert store.get_messages(last.data["request"]) == conversation[:-2]
    db = sqlite3.connect(path)
    (blobs,) = db.execute("SELECT COUNT(*) FROM blobs").fetchone()
    db.close()
    assert blobs == 2 + 2 * 100  # … but each distinct message is one row


def test_follow_yields_new_events_until_told_to_stop(tmp_path: Path) -> None:
    path = tmp_path / "events.db"

    async def scenario(store: EventStore) -> list[Event]:
        old = store.append("r", "a", "tick", {"i": -1})
        seen: list[Event] = []

        async def consume() -> None:
            async for event in store.follow(
                run="r",
                kinds=["tick", "stop"],
                after_id=old.id,
                until=lambda e: e.kind == "stop",
                poll_s=0.01,
            ):
                seen.append(event)

        consumer = asyncio.create_task(consume())
        for i in range(3):
            await asyncio.sleep(0.02)
            store.append("r", "a", "tick", {"i": i})
            store.append("r", "a", "noise", {})
            store.append("other", "a", "tick", {"i": 99})
        store.append("r", "b", "stop", {})
        store.append("r", "a", "tick", {"i": 100})  # after the stop: not seen
        await asyncio.wait_for(consumer, 5)
        return seen

    with EventStore.open(path) as store:
        seen = asyncio.run(scenario(store))
    assert [(e.kind, e.data) for e in seen] == [
        ("tick", {"i": 0}),
        ("tick", {"i": 1}),
        ("tick", {"i": 2}),
        ("stop", {}),
    ]
