"""The readable log: what a person sees for each kind of event, and `print_log` with and without follow."""

from __future__ import annotations

import io
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hilbert.models.types import Message, ToolCall
from hilbert.store import Event, EventStore
from hilbert.ui.log_view import format_event, print_log

USAGE = {"input_tokens": 1234, "output_tokens": 56, "cache_read_tokens": 1000, "cache_write_tokens": 0}


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    with EventStore.open(tmp_path / "events.db") as opened:
        yield opened  # type: ignore[misc]


def lines_of(event: Event, store: EventStore) -> list[str]:
    """The rendered lines, with the "HH:MM:SS agent" prefix of the first checked and removed."""
    lines = format_event(event, store).split("\n")
    prefix = f"{time.strftime('%H:%M:%S', time.localtime(event.time))} {event.agent}"
    assert lines[0].startswith(prefix)
    return [line.strip() for line in lines]


def model_call(store: EventStore, reply: Message, **extra: object) -> Event:
    data = {
        "request": store.put_messages([Message("user", "go")]),
        "tools": ["shell"],
        "response": store.put_messages([reply])[0],
        "usage": USAGE,
        "cost_usd": 0.0012,
        "latency_s": 1.23,
        "ttft_s": 0.2,
        "stop_reason": "tool_use",
        "model": "m",
        "attempts": 1,
    } | extra
    return store.append("r", "alice", "model_call", data)


def tool_result(
    store: EventStore, name: str, arguments: dict[str, object], output: str, is_error: bool = False
) -> Event:
    message = Message("tool", output, tool_call_id="c", name=name, is_error=is_error)
    data = {
        "call_id": "c",
        "name": name,
        "arguments": arguments,
        "message": store.put_messages([message])[0],
        "is_error": is_error,
        "duration_s": 0.81,
    }
    return store.append("r", "alice", "tool_result", data)


def test_agent_started(store: EventStore) -> None:
    event = store.append(
        "r",
        "alice",
        "agent_started",
        {
            "task": "Make the tests pass.\nThey are in tests/.",
            "model": "openai:gpt-5",
            "workspace": "/tmp/ws",
            "tools": ["shell", "finish"],
            "messages": store.put_messages([Message("user", "x")]),
        },
    )
    assert lines_of(event, store)[0].endswith(
        "alice        started: openai:gpt-5, 2 tools (shell, finish) in /tmp/ws"
    )
    assert lines_of(event, store)[1:] == ["task: Make the tests pass. …"]


def test_model_call_counts_calls_and_shows_tokens_cost_and_outcome(store: EventStore) -> None:
    model_call(store, Message("assistant", "first"))
    store.append("r", "bob", "model_call", {})  # another agent's call does not change alice's count
    reply = Message(
        "assistant",
        "Let me run the tests.\nThen fix.\nThen commit.\nThen finish.",
        tool_calls=(ToolCall("1", "shell", {}), ToolCall("2", "write_file", {})),
    )
    second = model_call(store, reply)
    head, *rest = lines_of(second, store)
    assert head.endswith(
        "alice        model call 2: 1,234 in (1,000 cached) / 56 out, $0.0012, 1.2s"
        " → 2 tool calls (shell, write_file)"
    )
    assert rest == ["Let me run the tests.", "Then fix.", "… (2 more lines)"]
    plain = model_call(
        store,
        Message("assistant", "All done."),
        stop_reason="max_tokens",
        attempts=3,
        usage=USAGE | {"cache_write_tokens": 200},
    )
    head, *rest = lines_of(plain, store)
    assert head.endswith(
        "model call 3: 1,234 in (1,000 cached, 200 cache-written) / 56 out, $0.0012, 1.2s, 3 attempts"
        " → reply (max_tokens)"
    )
    assert rest == ["All done."]


def test_shell_result_shows_command_exit_code_and_first_lines(store: EventStore) -> None:
    output = "[exit 1]\n.F\nFAILED test_a.py::test_x - assert 1 == 2\n1 failed, 1 passed in 0.1s\nextra\nmore"
    event = tool_result(store, "shell", {"command": "python -m pytest -q"}, output)
    head, *rest = lines_of(event, store)
    assert head.endswith("alice        shell `python -m pytest -q` → exit 1 (0.8s)")
    assert rest == [
        ".F",
        "FAILED test_a.py::test_x - assert 1 == 2",
        "1 failed, 1 passed in 0.1s",
        "… (2 more lines)",
    ]


def test_other_tool_results(store: EventStore) -> None:
    failed = tool_result(store, "read_file", {"path": "src/x.py"}, "no such file: src/x.py", is_error=True)
    assert lines_of(failed, store) == [lines_of(failed, store)[0], "no such file: src/x.py"]
    assert lines_of(failed, store)[0].endswith("read_file src/x.py → error (0.8s)")
    finish = tool_result(
        store, "finish", {"claim": "All tests pass.", "evidence": "pytest"}, "finish recorded"
    )
    assert lines_of(finish, store)[0].endswith("finish claim: All tests pass. → ok (0.8s)")
    odd = tool_result(store, "search", {"regex": "x" * 300}, "")
    head, *rest = lines_of(odd, store)
    assert "→ ok (0.8s)" in head and 'search {"regex":"xxx' in head and "…" in head and rest == []
    assert len(head) < 160


def test_model_error_injection_policy_action_and_stop(store: EventStore) -> None:
    error = store.append(
        "r", "alice", "model_error", {"error": "RateLimitError", "message": "429: slow down\nretry"}
    )
    assert lines_of(error, store)[0].endswith("model error: RateLimitError: 429: slow down …")
    note = Message("user", "Reminder: you have not run the tests.\nRun them.")
    injected = store.append(
        "r", "alice", "message_injected", {"message": store.put_messages([note])[0], "by": "reminder"}
    )
    assert lines_of(injected, store)[1:] == ["Run them."]
    assert lines_of(injected, store)[0].endswith(
        "reminder added a user message: Reminder: you have not run the tests."
    )
    halt = store.append(
        "r",
        "alice",
        "policy_action",
        {"policy": "turn_limit", "moment": "before_model_call", "action": "halt", "reason": "30 turns"},
    )
    assert lines_of(halt, store)[0].endswith("turn_limit → halt (at before_model_call): 30 turns")
    stop = store.append(
        "r",
        "alice",
        "agent_stopped",
        {
            "status": "finished",
            "claim": "Tests pass.",
            "evidence": "",
            "reason": None,
            "turns": 3,
            "usage": USAGE,
            "cost_usd": 0.0345,
        },
    )
    assert lines_of(stop, store)[1:] == ["claim: Tests pass."]
    assert lines_of(stop, store)[0].endswith(
        "stopped (finished) after 3 turns, 1,234 in (1,000 cached) / 56 out, $0.0345"
    )


def test_unknown_or_malformed_events_are_shown_raw_not_crashed_on(store: EventStore) -> None:
    new_kind = store.append("r", "alice", "merge_queued", {"branch": "b1"})
    assert lines_of(new_kind, store)[0].endswith('merge_queued {"branch":"b1"}')
    broken = store.append("r", "alice", "tool_result", {"name": "shell"})  # no message hash
    assert lines_of(broken, store)[0].endswith('tool_result {"name":"shell"}')


def test_print_log_shows_runs_agents_and_filters(store: EventStore) -> None:
    for run, agent in (("r1", "alice"), ("r1", "bob"), ("r2", "alice")):
        store.append(run, agent, "agent_stopped", {"status": "finished", "turns": 1, "cost_usd": 0.5})
    everything = io.StringIO()
    print_log(store, out=everything)
    text = everything.getvalue()
    assert text.count("── run r1 ──") == 1 and text.count("── run r2 ──") == 1
    assert text.index("── run r1 ──") < text.index(" bob ") < text.index("── run r2 ──")
    assert text.count("stopped (finished) after 1 turn, $0.5000") == 3
    one = io.StringIO()
    print_log(store, run="r1", agent="bob", out=one)
    assert one.getvalue().count("\n") == 1 and " bob " in one.getvalue() and "run" not in one.getvalue()


def test_print_log_follows_another_process_until_told(
    tmp_path: Path, spawn_writer: Callable[..., subprocess.Popen[str]]
) -> None:
    path = tmp_path / "events.db"
    with EventStore.open(path) as store:
        store.append("run", "a", "agent_started", {"task": "t", "model": "m", "tools": [], "messages": []})
        proc = spawn_writer(path, "run", "w", 5, "--wait-go", "--delay", "0.01")
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        out = io.StringIO()
        done = threading.Event()

        def follow() -> None:
            print_log(
                store, run="run", follow=True, out=out, until=lambda e: e.data.get("i") == 4, poll_s=0.02
            )
            done.set()

        thread = threading.Thread(target=follow)
        thread.start()
        time.sleep(0.2)
        assert "started: m" in out.getvalue() and "tick" not in out.getvalue()  # history, then waiting
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        thread.join(30)
        assert done.is_set()
    ticks = [line for line in out.getvalue().splitlines() if " tick " in line]
    assert [line.split("tick ", 1)[1] for line in ticks] == [f'{{"tag":"w","i":{i}}}' for i in range(5)]
