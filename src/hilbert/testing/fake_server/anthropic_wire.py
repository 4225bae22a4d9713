"""Anthropic Messages on the wire (`POST /v1/messages`, `POST /v1/messages/count_tokens`).

Parsing: `system` (string or text blocks), user/assistant messages whose content is a string or
blocks; `tool_use` blocks become `ToolCall`s, `tool_result` blocks become `Message(role="tool")` with
their content flattened to text and `is_error` kept; thinking blocks are dropped. Tools with an
`input_schema` are function tools; others (`bash_20250124`, `web_search_...`) are kept by name with
their type in the description.

Rendering follows the SSE order that the anthropic SDK's `MessageStream` accumulates:
message_start, ping, per block content_block_start / *_delta... / content_block_stop,
message_delta (stop_reason, usage), message_stop. Usage: `input_tokens` is the uncached part,
`cache_read_input_tokens` the cached prefix, `cache_creation_input_tokens` the newly cached part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from hilbert.models.types import Message, ToolCall, ToolSpec, Usage
from hilbert.testing.fake_server.responder import Conversation, Reply
from hilbert.testing.fake_server.usage import chunk_text
from hilbert.testing.fake_server.wire import (
    DELTA,
    BadRequest,
    Frame,
    Ids,
    Stamp,
    WireRequest,
    arguments_text,
    flatten_text,
    model_of,
    parse_arguments,
    require,
    sse,
)

PROTOCOL: Final = "anthropic"
ID_PREFIX = "msg_"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise BadRequest("message content must be a string or a list of blocks")
    return [b for b in content if isinstance(b, Mapping)]


def _assistant(content: Any) -> Message:
    texts, calls = [], []
    for block in _blocks(content):
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            arguments, raw = parse_arguments(block.get("input", {}))
            calls.append(ToolCall(str(block.get("id", "")), str(block.get("name", "")), arguments, raw))
    return Message(role="assistant", content="\n".join(texts), tool_calls=tuple(calls))


def _user(content: Any, tool_names: Mapping[str, str]) -> list[Message]:
    messages, pending = [], []
    for block in _blocks(content):
        if block.get("type") != "tool_result":
            pending.append(block)
            continue
        if pending:
            messages.append(Message(role="user", content=flatten_text(pending)))
            pending = []
        call_id = str(block.get("tool_use_id", ""))
        messages.append(
            Message(
                role="tool",
                content=flatten_text(block.get("content")),
                tool_call_id=call_id,
                name=tool_names.get(call_id),
                is_error=bool(block.get("is_error", False)),
            )
        )
    if pending or not messages:
        messages.append(Message(role="user", content=flatten_text(pending)))
    return messages


def _tools(body: Mapping[str, Any]) -> tuple[tuple[ToolSpec, ...], dict[str, str]]:
    specs, kinds = [], {}
    for tool in body.get("tools") or ():
        if not isinstance(tool, Mapping):
            raise BadRequest("each tool must be an object")
        kind = tool.get("type")
        if "input_schema" in tool or kind in (None, "custom"):
            name = require(tool, "name", str)
            specs.append(
                ToolSpec(name, str(tool.get("description") or ""), dict(tool.get("input_schema") or {}))
            )
        else:
            name = str(tool.get("name") or kind)
            kinds[name] = str(kind)
            specs.append(ToolSpec(name, f"[{kind}]", {}))
    return tuple(specs), kinds


def parse(body: Mapping[str, Any]) -> WireRequest:
    model = model_of(body)
    messages: list[Message] = []
    tool_names: dict[str, str] = {}
    for item in require(body, "messages", list):
        if not isinstance(item, Mapping) or item.get("role") not in ("user", "assistant"):
            raise BadRequest("each message needs role 'user' or 'assistant'")
        if item["role"] == "assistant":
            message = _assistant(item.get("content"))
            tool_names.update((c.id, c.name) for c in message.tool_calls)
            messages.append(message)
        else:
            messages.extend(_user(item.get("content"), tool_names))
    tools, kinds = _tools(body)
    conversation = Conversation(PROTOCOL, model, flatten_text(body.get("system")), tuple(messages), tools)
    return WireRequest(conversation, stream=bool(body.get("stream")), tool_kinds=kinds)


def usage_json(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _content(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for call in reply.tool_calls:
        arguments: Any = call.arguments if call.raw_arguments is None else call.raw_arguments
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def _message(
    request: WireRequest, ids: Ids, content: list[Any], stop: str | None, usage: dict[str, int]
) -> dict[str, Any]:
    return {
        "id": ids.response,
        "type": "message",
        "role": "assistant",
        "model": request.conversation.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def render(request: WireRequest, reply: Reply, usage: Usage, ids: Ids) -> dict[str, Any]:
    return _message(request, ids, _content(reply), _stop_reason(reply), usage_json(usage))


def render_stream(
    request: WireRequest, reply: Reply, usage: Usage, ids: Ids, chunk_tokens: int
) -> list[Frame]:
    start_usage = dict(usage_json(usage), output_tokens=1)
    frames = [
        Frame(
            sse(
                "message_start",
                {"type": "message_start", "message": _message(request, ids, [], None, start_usage)},
            )
        ),
        Frame(sse("ping", {"type": "ping"})),
    ]

    def block(index: int, start: dict[str, Any], delta_type: str, key: str, text: str) -> None:
        frames.append(
            Frame(
                sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
        )
        delta = {"type": "content_block_delta", "index": index, "delta": {"type": delta_type, key: DELTA}}
        stamp = Stamp("content_block_delta", delta)
        frames.extend(Frame(stamp.fill(piece), tokens) for piece, tokens in chunk_text(text, chunk_tokens))
        frames.append(Frame(sse("content_block_stop", {"type": "content_block_stop", "index": index})))

    index = 0
    if reply.text:
        block(index, {"type": "text", "text": ""}, "text_delta", "text", reply.text)
        index += 1
    for call in reply.tool_calls:
        start = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        block(index, start, "input_json_delta", "partial_json", arguments_text(call))
        index += 1
    end = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    frames.append(
        Frame(sse("message_delta", {"type": "message_delta", "delta": end, "usage": usage_json(usage)}))
    )
    frames.append(Frame(sse("message_stop", {"type": "message_stop"})))
    return frames


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
