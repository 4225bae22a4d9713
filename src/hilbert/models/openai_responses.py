"""The OpenAI Responses adapter (`openai-responses:NAME`), through the official `openai` SDK.

Wire mapping: the first system message → `instructions`, later ones stay in place as system input
messages; assistant text → assistant messages; assistant tool calls → `function_call` items; tool
results → `function_call_output` items. Requests are sent with `store=False` (the conversation is
resent each turn, nothing is kept server-side). Usage `input_tokens` is the whole prompt and
`input_tokens_details.cached_tokens` its cached part. `response.failed` and `error` events become
`ProviderStreamError`; a stream without `response.completed` / `response.incomplete` is retried.
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from hilbert.models.failures import ProviderStreamError, StreamDropped
from hilbert.models.openai_chat import arguments_text, openai_client
from hilbert.models.types import Message, StopReason, TextCallback, ToolSpec, Usage
from hilbert.models.wire import TurnBuilder, WireModel

_INCOMPLETE: dict[str, StopReason] = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}


class OpenAIResponsesModel(WireModel):
    """`Model` over OpenAI Responses (streaming)."""

    def _sdk(self, http: httpx2.AsyncClient) -> openai.AsyncOpenAI:
        return openai_client(self, http)

    def _request(self, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.spec.name, "store": False}
        if messages and messages[0].role == "system":
            request["instructions"] = messages[0].content
            messages = messages[1:]
        request["input"] = [item for m in messages for item in wire_items(m)]
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in tools
            ]
        if self.settings.max_tokens:
            request["max_output_tokens"] = self.settings.max_tokens
        return request

    async def _attempt(self, sdk: Any, request: dict[str, Any], on_text: TextCallback | None) -> TurnBuilder:
        turn = TurnBuilder(on_text)
        stream = await sdk.responses.create(**request, stream=True)
        turn.response(stream)
        final = None
        async with stream:
            async for event in stream:
                kind = event.type
                if kind == "response.output_text.delta" or kind == "response.refusal.delta":
                    turn.text(event.delta)
                    if kind == "response.refusal.delta":
                        turn.stop_reason = "refusal"
                elif kind in ("response.output_item.added", "response.output_item.done"):
                    item = event.item
                    if item.type == "function_call":
                        turn.tool_start(event.output_index, call_id=item.call_id, name=item.name)
                        if kind == "response.output_item.done" or item.arguments:
                            turn.tool_args_final(event.output_index, item.arguments)
                elif kind == "response.function_call_arguments.delta":
                    turn.tool_args(event.output_index, event.delta)
                elif kind == "response.function_call_arguments.done":
                    turn.tool_args_final(event.output_index, event.arguments)
                elif kind in ("response.completed", "response.incomplete"):
                    final = event.response
                elif kind == "response.failed":
                    error = event.response.error
                    raise ProviderStreamError(_as_dict(error) or {"message": "response failed"})
                elif kind == "error":
                    raise ProviderStreamError(
                        {"code": event.code, "message": event.message, "param": getattr(event, "param", None)}
                    )
                if kind == "response.created":
                    turn.model = event.response.model or None
        if final is None:
            raise StreamDropped("no response.completed event")
        turn.model = final.model or turn.model
        turn.usage = _usage(final.usage)
        if final.status == "incomplete":
            details = final.incomplete_details
            turn.stop_reason = _INCOMPLETE.get(getattr(details, "reason", None) or "", "other")
        elif turn.stop_reason is None:
            turn.stop_reason = "tool_use" if turn.calls else "end_turn"
        return turn


def _as_dict(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    return value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else dict(value)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    details = getattr(usage, "input_tokens_details", None)
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=getattr(details, "cached_tokens", None) or 0,
    )


def wire_items(message: Message) -> list[dict[str, Any]]:
    """One neutral message as Responses input items."""
    if message.role == "tool":
        return [
            {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.content}
        ]
    items: list[dict[str, Any]] = []
    if message.content or message.role != "assistant":
        items.append({"type": "message", "role": message.role, "content": message.content})
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": arguments_text(call),
            }
        )
    return items
