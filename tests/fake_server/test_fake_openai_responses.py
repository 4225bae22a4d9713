"""The official openai SDK's Responses client (what Codex speaks) against the fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from fake_server_support import SYSTEM, Seen

from hilbert.testing.fake_server import FakeServer, ScriptedResponder

TOOLS = [
    {"type": "function", "name": "read_file", "description": "Read a file", "parameters": {"type": "object"}},
    {"type": "function", "name": "run", "description": "Run a command", "parameters": {"type": "object"}},
]
TASK = [{"role": "user", "content": "Fix the failing test."}]


@pytest.fixture
def client(server: FakeServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.openai_base_url, api_key="test-key", max_retries=0) as sdk:
        yield sdk


def _calls(response: openai.types.responses.Response) -> list[tuple[str, dict[str, object]]]:
    return [
        (item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"
    ]


def _with_results(response: openai.types.responses.Response) -> list[object]:
    items: list[object] = [*TASK, *(item.model_dump(exclude_none=True) for item in response.output)]
    calls = [item for item in response.output if item.type == "function_call"]
    items.append({"type": "function_call_output", "call_id": calls[0].call_id, "output": "print('hi')"})
    items.append({"type": "function_call_output", "call_id": calls[1].call_id, "output": "1 passed"})
    return items


def test_non_streamed_turn_has_two_calls_then_cached_prefix(client: openai.OpenAI, policy: Seen) -> None:
    first = client.responses.create(model="fake-codex", instructions=SYSTEM, input=TASK, tools=TOOLS)
    assert first.status == "completed" and first.output_text == "Two things to check first."
    assert _calls(first) == [("read_file", {"path": "src/app.py"}), ("run", {"command": "pytest -q"})]
    assert first.usage.input_tokens > 50 and first.usage.input_tokens_details.cached_tokens == 0

    second = client.responses.create(
        model="fake-codex", instructions=SYSTEM, input=_with_results(first), tools=TOOLS
    )
    assert second.output_text == "All done: the tests pass." and _calls(second) == []
    cached = second.usage.input_tokens_details.cached_tokens
    assert first.usage.input_tokens - 16 <= cached <= first.usage.input_tokens < second.usage.input_tokens

    seen = policy.conversations[-1]
    assert seen.system == SYSTEM
    assert [m.role for m in seen.messages] == ["user", "assistant", "tool", "tool"]
    assert [c.name for c in seen.messages[1].tool_calls] == ["read_file", "run"]
    assert seen.messages[2].content == "print('hi')" and seen.messages[2].name == "read_file"


def test_streamed_turn_ends_with_completed_response_and_usage(client: openai.OpenAI) -> None:
    with client.responses.stream(model="fake-codex", instructions=SYSTEM, input=TASK, tools=TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") > 1
    assert kinds.count("response.function_call_arguments.done") == 2
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert final.output_text == "Two things to check first."
    assert _calls(final) == [("read_file", {"path": "src/app.py"}), ("run", {"command": "pytest -q"})]
    assert final.usage is not None and final.usage.output_tokens > 0

    with client.responses.stream(
        model="fake-codex", instructions=SYSTEM, input=_with_results(final)
    ) as stream:
        again = stream.get_final_response()
    assert again.usage.input_tokens_details.cached_tokens > 0


def test_custom_and_local_shell_tools_are_seen_and_answered_in_kind() -> None:
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"
    script = ScriptedResponder.from_turns([{"tool_calls": [{"name": "apply_patch", "arguments": patch}]}])
    policy = Seen(script)
    tools = [
        {"type": "custom", "name": "apply_patch", "description": "Apply a patch"},
        {"type": "local_shell"},
    ]
    with (
        FakeServer(policy) as server,
        openai.OpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0) as client,
    ):
        plain = client.responses.create(model="fake-codex", input="add hello.txt", tools=tools)
        with client.responses.stream(model="fake-codex", input="add hello.txt", tools=tools) as stream:
            streamed = stream.get_final_response()
    for response in (plain, streamed):
        (call,) = response.output
        assert (call.type, call.name, call.input) == ("custom_tool_call", "apply_patch", patch)
    offered = policy.conversations[0].tools
    assert [(t.name, t.description) for t in offered] == [
        ("apply_patch", "[custom] Apply a patch"),
        ("local_shell", "[local_shell]"),
    ]
