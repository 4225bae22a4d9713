"""The Anthropic Messages adapter (`anthropic:NAME`), through the official `anthropic` SDK.

Wire mapping: system messages → `system` (joined, in order); assistant tool calls → `tool_use` blocks;
tool results → `tool_result` blocks (`is_error` kept) in a user turn, consecutive results (and a user
text right after them) merged into one user message. Prompt caching: ephemeral `cache_control`
breakpoints on the system prompt, the last tool, the last message marked `cache_point` (the task
state the compaction restates after a cut: the new stable prefix) and the last block of the last
message — the 4 allowed. `max_tokens` is required by this API: `CallSettings.max_tokens` or
`DEFAULT_MAX_TOKENS`.
Usage: Anthropic reports uncached input, cache reads and cache writes apart; `input_tokens` here is
their sum (see `hilbert.models.types`).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2

from hilbert.models.defaults import DEFAULT_MAX_TOKENS
from hilbert.models.failures import StreamDropped
from hilbert.models.types import Message, StopReason, TextCallback, ToolSpec, Usage
from hilbert.models.wire import TurnBuilder, WireModel

_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


class AnthropicMessagesModel(WireModel):
    """`Model` over Anthropic Messages (streaming)."""

    def _sdk(self, http: httpx2.AsyncClient) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self.endpoint.api_key,
            base_url=self.endpoint.base_url,
            max_retries=0,
            timeout=httpx2.Timeout(self.settings.timeout_s),
            http_client=http,
        )

    def _request(self, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        request: dict[str, Any] = {
            "model": self.spec.name,
            "max_tokens": self.settings.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": wire_messages(messages),
        }
        if system:
            request["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
        if tools:
            wire_tools = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
            wire_tools[-1]["cache_control"] = _EPHEMERAL
            request["tools"] = wire_tools
        return request

    async def _attempt(self, sdk: Any, request: dict[str, Any], on_text: TextCallback | None) -> TurnBuilder:
        turn = TurnBuilder(on_text)
        stream = await sdk.messages.create(**request, stream=True)
        turn.response(stream)
        usage: dict[str, int] = {}
        start_inputs: dict[int, str] = {}
        finished = False
        async with stream:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    turn.model = event.message.model or None
                    _merge_usage(usage, event.message.usage)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        turn.tool_start(event.index, call_id=block.id, name=block.name)
                        if block.input:  # Anthropic sends {} and then deltas; some servers send it whole
                            start_inputs[event.index] = json.dumps(block.input)
                    elif block.type == "text":
                        turn.text(block.text)
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        turn.text(delta.text)
                    elif delta.type == "input_json_delta":
                        turn.tool_args(event.index, delta.partial_json)
                elif kind == "message_delta":
                    if event.delta.stop_reason:
                        turn.stop_reason = _STOP_REASONS.get(event.delta.stop_reason, "other")
                    _merge_usage(usage, event.usage)
                elif kind == "message_stop":
                    finished = True
        if not finished:
            raise StreamDropped("no message_stop event")
        for index, arguments in start_inputs.items():
            if not turn.calls[index]["args"]:
                turn.tool_args_final(index, arguments)
        cache_read = usage.get("cache_read_input_tokens", 0)
        cache_write = usage.get("cache_creation_input_tokens", 0)
        turn.usage = Usage(
            input_tokens=usage.get("input_tokens", 0) + cache_read + cache_write,
            output_tokens=usage.get("output_tokens", 0),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
        return turn


def _merge_usage(into: dict[str, int], usage: Any) -> None:
    """Later usage reports (message_delta) override earlier ones field by field when present."""
    if usage is None:
        return
    for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = getattr(usage, name, None)
        if value is not None:
            into[name] = int(value)


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages (system ones skipped) as Anthropic `messages`, with a cache breakpoint on the
    last `cache_point` message (when it is not the last message) and one last."""
    wire: list[dict[str, Any]] = []
    point = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].cache_point), None)
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
            wire.append(
                {"role": "assistant", "content": blocks or [{"type": "text", "text": "(no content)"}]}
            )
            continue
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
        else:
            block = {"type": "text", "text": message.content or "(empty)"}
        if index == point:
            block["cache_control"] = _EPHEMERAL
        if wire and wire[-1]["role"] == "user":
            wire[-1]["content"].append(block)
        else:
            wire.append({"role": "user", "content": [block]})
    if wire:
        wire[-1]["content"][-1] = {**wire[-1]["content"][-1], "cache_control": _EPHEMERAL}
    return wire
