"""The OpenAI Chat Completions adapter (`openai:NAME`, also any OpenAI-compatible server), through
the official `openai` SDK.

Wire mapping: system messages stay in place as `role: system`; assistant tool calls → `tool_calls`;
tool results → `role: tool` messages (Chat has no error flag: a failed call says so in its content).
Streams with `stream_options.include_usage`; usage `prompt_tokens` is the whole prompt and
`prompt_tokens_details.cached_tokens` its cached part. A stream that ends without a `finish_reason`
was cut short and is retried. `max_completion_tokens` is sent only when `CallSettings.max_tokens` is set.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai

from hilbert.models.failures import StreamDropped
from hilbert.models.types import Message, StopReason, TextCallback, ToolCall, ToolSpec, Usage
from hilbert.models.wire import TurnBuilder, WireModel

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def openai_client(model: WireModel, http: httpx2.AsyncClient) -> openai.AsyncOpenAI:
    """The SDK client both OpenAI adapters use: our endpoint, our timeout, no SDK retries."""
    return openai.AsyncOpenAI(
        api_key=model.endpoint.api_key,
        base_url=model.endpoint.base_url,
        max_retries=0,
        timeout=httpx2.Timeout(model.settings.timeout_s),
        http_client=http,
    )


def arguments_text(call: ToolCall) -> str:
    """A tool call's arguments as the model sent them (raw when they were not valid JSON)."""
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)


class OpenAIChatModel(WireModel):
    """`Model` over OpenAI Chat Completions (streaming)."""

    def _sdk(self, http: httpx2.AsyncClient) -> openai.AsyncOpenAI:
        return openai_client(self, http)

    def _request(self, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.spec.name,
            "messages": [wire_message(m) for m in messages],
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        if self.settings.max_tokens:
            request["max_completion_tokens"] = self.settings.max_tokens
        return request

    async def _attempt(self, sdk: Any, request: dict[str, Any], on_text: TextCallback | None) -> TurnBuilder:
        turn = TurnBuilder(on_text)
        stream = await sdk.chat.completions.create(**request, stream=True)
        turn.response(stream)
        finish: str | None = None
        async with stream:
            async for chunk in stream:
                turn.model = chunk.model or turn.model
                if chunk.usage is not None:
                    turn.usage = _usage(chunk.usage)
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta is not None:
                        turn.text(delta.content)
                        for position, call in enumerate(delta.tool_calls or ()):
                            key = call.index if call.index is not None else position
                            function = call.function
                            turn.tool_start(key, call_id=call.id, name=function.name if function else None)
                            turn.tool_args(key, function.arguments if function else None)
                    finish = choice.finish_reason or finish
        if finish is None:
            raise StreamDropped("no finish_reason in the stream")
        turn.stop_reason = _STOP_REASONS.get(finish, "other")
        return turn


def _usage(usage: Any) -> Usage:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
    )


def wire_message(message: Message) -> dict[str, Any]:
    """One neutral message as a Chat Completions message."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(c)}}
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}
