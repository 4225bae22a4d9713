"""The official anthropic SDK (what Claude Code speaks) against the fake server."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest
from fake_server_support import SYSTEM, Seen

from hilbert.testing.fake_server import FakeServer

TOOLS = [
    {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object"}},
    {"name": "run", "description": "Run a command", "input_schema": {"type": "object"}},
]
TASK = [{"role": "user", "content": "Fix the failing test."}]


@pytest.fixture
def client(server: FakeServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.base_url, api_key="test-key", max_retries=0) as sdk:
        yield sdk


def _calls(message: anthropic.types.Message) -> list[tuple[str, object]]:
    return [(block.name, block.input) for block in message.content if block.type == "tool_use"]


def _with_results(message: anthropic.types.Message) -> list[dict[str, object]]:
    ids = [block.id for block in message.content if block.type == "tool_use"]
    results = [
        {"type": "tool_result", "tool_use_id": ids[0], "content": "print('hi')"},
        {
            "type": "tool_result",
            "tool_use_id": ids[1],
            "is_error": True,
            "content": [{"type": "text", "text": "1 failed"}, {"type": "text", "text": "exit 1"}],
        },
        {"type": "text", "text": "Keep going."},
    ]
    assistant = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]}
    return [*TASK, assistant, {"role": "user", "content": results}]


def _create(client: anthropic.Anthropic, messages: list[dict[str, object]]) -> anthropic.types.Message:
    return client.messages.create(
        model="fake-claude", max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=messages
    )


def test_non_streamed_turn_has_two_tool_uses_then_cached_prefix(
    client: anthropic.Anthropic, policy: Seen
) -> None:
    first = _create(client, TASK)
    assert first.stop_reason == "tool_use"
    assert first.content[0].type == "text" and first.content[0].text == "Two things to check first."
    assert _calls(first) == [("read_file", {"path": "src/app.py"}), ("run", {"command": "pytest -q"})]
    assert first.usage.cache_read_input_tokens == 0
    prompt = first.usage.input_tokens + first.usage.cache_creation_input_tokens
    assert prompt > 50

    second = _create(client, _with_results(first))
    assert second.stop_reason == "end_turn" and second.content[0].text == "All done: the tests pass."
    usage = second.usage
    assert prompt - 16 <= usage.cache_read_input_tokens <= prompt
    assert usage.cache_creation_input_tokens > 0 and usage.input_tokens >= 0

    seen = policy.conversations[-1]
    assert seen.protocol == "anthropic" and seen.system == SYSTEM
    assert [m.role for m in seen.messages] == ["user", "assistant", "tool", "tool", "user"]
    failed = seen.messages[3]
    assert (failed.name, failed.is_error, failed.content) == ("run", True, "1 failed\nexit 1")
    assert seen.messages[2].is_error is False and seen.messages[4].content == "Keep going."


def test_stream_helper_builds_the_final_message(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model="fake-claude", max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=TASK
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == "Two things to check first."
    assert final.stop_reason == "tool_use"
    assert _calls(final) == [("read_file", {"path": "src/app.py"}), ("run", {"command": "pytest -q"})]
    assert final.usage.output_tokens > 1

    with client.messages.stream(
        model="fake-claude", max_tokens=1024, system=SYSTEM, tools=TOOLS, messages=_with_results(final)
    ) as stream:
        again = stream.get_final_message()
    assert again.stop_reason == "end_turn" and again.usage.cache_read_input_tokens > 0


def test_count_tokens_and_models_list(client: anthropic.Anthropic, server: FakeServer) -> None:
    short = client.messages.count_tokens(model="fake-claude", messages=TASK)
    longer = client.messages.count_tokens(model="fake-claude", system=SYSTEM, tools=TOOLS, messages=TASK)
    assert 0 < short.input_tokens < longer.input_tokens
    _create(client, TASK)
    assert "fake-claude" in [model.id for model in client.models.list()]
    last = server.requests[-1]
    assert (last["method"], last["path"].split("?")[0], last["status"]) == ("GET", "/v1/models", 200)


def test_query_string_is_ignored(server: FakeServer) -> None:
    with anthropic.Anthropic(
        base_url=server.base_url, api_key="k", max_retries=0, default_query={"beta": "true"}
    ) as client:
        message = _create(client, TASK)
    assert message.stop_reason == "tool_use"
    assert server.requests[-1]["path"] == "/v1/messages?beta=true"
