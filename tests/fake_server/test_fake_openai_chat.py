"""The official openai SDK's Chat Completions client against the fake server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import openai
import pytest
from fake_server_support import SYSTEM, Seen

from hilbert.testing.fake_server import FakeServer

TOOLS = [
    {"type": "function", "function": {"name": n, "description": d, "parameters": {"type": "object"}}}
    for n, d in (("read_file", "Read a file"), ("run", "Run a command"))
]
FIRST = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the failing test."}]


@pytest.fixture
def client(server: FakeServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.openai_base_url, api_key="test-key", max_retries=0) as sdk:
        yield sdk


def _second_turn(message: openai.types.chat.ChatCompletionMessage) -> list[dict[str, object]]:
    results = [
        {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "print('hi')"},
        {
            "role": "tool",
            "tool_call_id": message.tool_calls[1].id,
            "content": [{"type": "text", "text": "1 passed"}],
        },
    ]
    return [*FIRST, message.model_dump(exclude_none=True), *results]


def test_non_streamed_turn_has_two_tool_calls_then_cached_prefix(client: openai.OpenAI, policy: Seen) -> None:
    first = client.chat.completions.create(model="fake-gpt", messages=FIRST, tools=TOOLS)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    assert message.content == "Two things to check first."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("read_file", {"path": "src/app.py"}),
        ("run", {"command": "pytest -q"}),
    ]
    assert len({c.id for c in message.tool_calls}) == 2
    assert first.usage.prompt_tokens > 50 and first.usage.prompt_tokens_details.cached_tokens == 0

    second = client.chat.completions.create(model="fake-gpt", messages=_second_turn(message), tools=TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "All done: the tests pass."
    cached = second.usage.prompt_tokens_details.cached_tokens
    assert first.usage.prompt_tokens - 16 <= cached <= first.usage.prompt_tokens < second.usage.prompt_tokens

    seen = policy.conversations[-1]
    assert seen.system == SYSTEM and [t.name for t in seen.tools] == ["read_file", "run"]
    assert [m.role for m in seen.messages] == ["user", "assistant", "tool", "tool"]
    assert seen.messages[1].tool_calls[1].arguments == {"command": "pytest -q"}
    assert (seen.messages[3].name, seen.messages[3].content) == ("run", "1 passed")


def test_streamed_turn_accumulates_tool_calls_and_usage(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model="fake-gpt", messages=FIRST, tools=TOOLS, stream_options={"include_usage": True}
    ) as stream:
        content_deltas = [e.delta for e in stream if e.type == "content.delta"]
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    assert len(content_deltas) > 1 and "".join(content_deltas) == "Two things to check first."
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in message.tool_calls] == ["read_file", "run"]
    assert json.loads(message.tool_calls[0].function.arguments) == {"path": "src/app.py"}
    assert completion.usage is not None and completion.usage.completion_tokens > 0

    again = client.chat.completions.create(
        model="fake-gpt",
        messages=_second_turn(message),
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(again)
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens_details.cached_tokens > 0
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "All done: the tests pass."
    )


def test_stream_without_include_usage_sends_no_usage_chunk(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="fake-gpt", messages=FIRST, stream=True))
    assert all(chunk.choices and chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_prompt_cache_is_kept_per_model(client: openai.OpenAI) -> None:
    client.chat.completions.create(model="model-a", messages=FIRST)
    other = client.chat.completions.create(model="model-b", messages=FIRST)
    same = client.chat.completions.create(model="model-a", messages=FIRST)
    assert other.usage.prompt_tokens_details.cached_tokens == 0
    assert same.usage.prompt_tokens_details.cached_tokens > 0


def test_many_concurrent_async_streams(server: FakeServer) -> None:
    async def main() -> list[str]:
        async with openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0) as client:

            async def one(i: int) -> str:
                messages = [{"role": "user", "content": f"task {i}"}]
                async with client.chat.completions.stream(model="fake-gpt", messages=messages) as stream:
                    completion = await stream.get_final_completion()
                return completion.choices[0].finish_reason

            return await asyncio.gather(*(one(i) for i in range(64)))

    assert asyncio.run(main()) == ["tool_calls"] * 64
    assert len(server.requests) == 64
