"""Every adapter against the project's fake model server over loopback, through the official SDKs:
streamed text, several tool calls per turn, tool results round-tripping, cached-token usage and
cost, malformed tool arguments. One test per behaviour, run on all three protocols."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest

from hilbert.context.pinned import PINNED_MARK
from hilbert.context.render import TokenCache
from hilbert.context.strategies import strategy_named
from hilbert.context.tokens import openai_encoding
from hilbert.models import (
    Completion,
    Message,
    Model,
    PriceTable,
    RetryPolicy,
    ToolCall,
    ToolSpec,
    Usage,
    make_model,
)
from hilbert.testing.fake_server import Conversation, FakeServer, Reply, Responder, ScriptedResponder

PROTOCOLS = ("anthropic", "openai", "openai-responses")
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02)
READ = ToolSpec(
    "read_file",
    "Read a file of the workspace.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
LONG_TEXT = "The tests fail because parse_date ignores the time zone; I will read both files first."


def model_for(server: FakeServer, protocol: str, **options: Any) -> Model:
    base = server.base_url if protocol == "anthropic" else server.openai_base_url
    options.setdefault("retry", FAST)
    return make_model(f"{protocol}:fake-model@{base}", env={}, **options)


def complete(model: Model, messages: list[Message], tools: list[ToolSpec], **kw: Any) -> Completion:
    return asyncio.run(model.complete(messages, tools, **kw))


def start() -> list[Message]:
    return [Message("system", "You are a careful engineer."), Message("user", "Why do the tests fail?")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_text_streams_to_on_text_as_it_arrives(protocol: str) -> None:
    deltas: list[str] = []
    with FakeServer(ScriptedResponder.from_turns([LONG_TEXT]), latency="ttft=0.05,chunk=3") as server:
        done = complete(model_for(server, protocol), start(), [], on_text=deltas.append)
    assert done.message.content == LONG_TEXT
    assert len(deltas) > 3 and "".join(deltas) == LONG_TEXT
    assert done.stop_reason == "end_turn"
    assert done.model == "fake-model"
    assert done.attempts == 1
    assert done.time_to_first_token_s is not None
    assert 0.05 <= done.time_to_first_token_s <= done.latency_s
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0


@dataclass(frozen=True)
class ReportingResponder:
    """First turn: two tool calls. Later turns: report, as JSON text, what came back to the server —
    so the adapter's reply shows what the server parsed out of the request."""

    name: str = "reporting"

    def reply(self, conversation: Conversation) -> Reply:
        results = [m for m in conversation.messages if m.role == "tool"]
        if not results:
            calls = (
                ToolCall("call_a", "read_file", {"path": "src/dates.py"}),
                ToolCall("call_b", "read_file", {"path": "tests/test_dates.py"}),
            )
            return Reply(text="Reading both.", tool_calls=calls)
        seen = {
            "system": conversation.system,
            "roles": [m.role for m in conversation.messages],
            "results": [[m.tool_call_id, m.content, m.is_error] for m in results],
            "calls": [[c.id, c.name, c.arguments] for m in conversation.messages for c in m.tool_calls],
            "tools": [t.name for t in conversation.tools],
        }
        return Reply(text=json.dumps(seen))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_several_tool_calls_and_their_results_round_trip(protocol: str) -> None:
    responder: Responder = ReportingResponder()
    with FakeServer(responder) as server:
        model = model_for(server, protocol)
        messages = start()
        first = complete(model, messages, [READ])
        assert first.stop_reason == "tool_use"
        assert first.message.content == "Reading both."
        assert [(c.name, c.arguments) for c in first.message.tool_calls] == [
            ("read_file", {"path": "src/dates.py"}),
            ("read_file", {"path": "tests/test_dates.py"}),
        ]
        ids = [c.id for c in first.message.tool_calls]
        messages += [
            first.message,
            Message("tool", "def parse_date(text): ...", tool_call_id=ids[0], name="read_file"),
            Message("tool", "no such file", tool_call_id=ids[1], name="read_file", is_error=True),
            Message("user", "Keep going."),
        ]
        second = complete(model, messages, [READ])
        bodies = [r["body"] for r in server.requests]
    seen = json.loads(second.message.content)
    assert second.stop_reason == "end_turn" and not second.message.tool_calls
    assert seen["system"] == "You are a careful engineer."
    assert seen["roles"] == ["user", "assistant", "tool", "tool", "user"]
    assert seen["calls"] == [
        [ids[0], "read_file", {"path": "src/dates.py"}],
        [ids[1], "read_file", {"path": "tests/test_dates.py"}],
    ]
    # Chat and Responses have no error flag on a tool result; Anthropic keeps it
    assert seen["results"] == [
        [ids[0], "def parse_date(text): ...", False],
        [ids[1], "no such file", protocol == "anthropic"],
    ]
    assert seen["tools"] == ["read_file"]
    assert_wire_shape(protocol, bodies[1])


def assert_wire_shape(protocol: str, body: dict[str, Any]) -> None:
    """The request in each provider's own terms (system prompt, tool calls, tool results)."""
    if protocol == "anthropic":
        assert body["system"][0]["text"] == "You are a careful engineer."
        assert body["max_tokens"] > 0
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant", "user"]  # both results and the user text in one turn
        results = body["messages"][2]["content"]
        assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
        assert results[1]["is_error"] is True
        assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use", "tool_use"]
    elif protocol == "openai":
        assert body["messages"][0] == {"role": "system", "content": "You are a careful engineer."}
        assert [m["role"] for m in body["messages"]] == [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
        ]
        assert len(body["messages"][2]["tool_calls"]) == 2
    else:
        assert body["instructions"] == "You are a careful engineer."
        kinds = [item.get("type") for item in body["input"]]
        assert kinds == [
            "message",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message",
        ]
        assert body["store"] is False


def test_anthropic_requests_carry_cache_breakpoints() -> None:
    with FakeServer(ScriptedResponder.from_turns(["ok"])) as server:
        complete(model_for(server, "anthropic", max_tokens=1234), start(), [READ])
        body = server.requests[0]["body"]
    ephemeral = {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == ephemeral
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    assert body["max_tokens"] == 1234


def test_after_a_cut_the_restated_task_state_carries_the_fourth_cache_breakpoint() -> None:
    conversation = start()
    for n in range(8):  # turns of ~150 tokens each, so a 600-token budget cuts
        call = ToolCall(f"c{n}", "read_file", {"path": f"m{n}.py"})
        conversation += [
            Message("assistant", f"Reading m{n}.py.", tool_calls=(call,)),
            Message("tool", f"def f{n}():\n" + "    return 1  # padding\n" * 30, tool_call_id=f"c{n}"),
        ]
    sent = strategy_named("forget:2,600", tokens=TokenCache(openai_encoding("o200k_base")))(conversation)
    assert any(m.content.startswith(PINNED_MARK) for m in sent) and len(sent) < len(conversation)
    with FakeServer(ScriptedResponder.from_turns(["ok"])) as server:
        complete(model_for(server, "anthropic"), sent, [READ])
        body = server.requests[0]["body"]
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marked) == 2 and marked[-1] is body["messages"][-1]["content"][-1]
    assert marked[0]["type"] == "text" and marked[0]["text"].startswith(PINNED_MARK)
    assert "cache_control" in body["system"][-1] and "cache_control" in body["tools"][-1]  # 4 in all


PRICES = PriceTable.default().with_overrides(
    {"fake-model": {"input": 2.0, "output": 10.0, "cache_read": 0.2, "cache_write": 2.5}}
)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cached_tokens_are_reported_in_one_convention_and_priced(protocol: str) -> None:
    script = ScriptedResponder.from_turns(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}, "Done."]
    )
    with FakeServer(script) as server:
        model = model_for(server, protocol, prices=PRICES)
        messages = start()
        first = complete(model, messages, [READ])
        call = first.message.tool_calls[0]
        messages += [first.message, Message("tool", "x = 1\n" * 40, tool_call_id=call.id, name="read_file")]
        second = complete(model, messages, [READ])
        served = [Usage(**r["usage"]) for r in server.requests]
    usage = second.usage
    assert usage.cache_read_tokens > 0  # the second prompt starts with the first one
    assert usage.input_tokens == served[1].input_tokens  # the whole prompt, cached part included
    assert usage.cache_read_tokens == served[1].cache_read_tokens
    if protocol == "anthropic":  # only Anthropic reports cache writes
        assert first.usage.cache_write_tokens == served[0].cache_write_tokens > 0
        assert usage.cache_write_tokens == served[1].cache_write_tokens
    uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    expected = (
        uncached * 2.0
        + usage.cache_read_tokens * 0.2
        + usage.cache_write_tokens * 2.5
        + usage.output_tokens * 10.0
    ) / 1e6
    assert second.cost_usd == pytest.approx(expected)
    without_cache = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    assert second.cost_usd < PRICES.cost(f"{protocol}:fake-model", without_cache)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_malformed_tool_arguments_are_kept_raw(protocol: str) -> None:
    script = ScriptedResponder.from_turns(
        [
            {
                "tool_calls": [
                    {"name": "read_file", "arguments": '{"path": "a.py"'},
                    {"name": "read_file", "arguments": {"path": "b.py"}},
                ]
            }
        ]
    )
    with FakeServer(script) as server:
        done = complete(model_for(server, protocol), start(), [READ])
    broken, fine = done.message.tool_calls
    assert broken.arguments == {} and broken.raw_arguments == '{"path": "a.py"'
    assert fine.arguments == {"path": "b.py"} and fine.raw_arguments is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_badjson_fault_reaches_the_loop_as_raw_arguments(protocol: str) -> None:
    script = ScriptedResponder.from_turns(
        [{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}}]}]
    )
    with FakeServer(script, faults="badjson=1.0") as server:
        done = complete(model_for(server, protocol), start(), [READ])
    (call,) = done.message.tool_calls
    assert call.arguments == {}
    assert call.raw_arguments is not None and "oops" in call.raw_arguments
