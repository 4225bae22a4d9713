"""OpenAI Chat Completions on the wire (`POST /v1/chat/completions`).

Parsing: `system` and `developer` messages form the system prompt; user text (string or parts);
assistant text and `tool_calls` (arguments are JSON text; invalid JSON is kept as `raw_arguments`);
`tool` messages become tool results. Function tools (and the legacy `functions`) become `ToolSpec`s;
`custom` tools are kept by name with their type in the description.

Rendering: a `chat.completion`, or `chat.completion.chunk`s: the role, content pieces, each tool call
opened with its id and name then its arguments in pieces, a chunk with `finish_reason`
(`tool_calls` or `stop`), a usage chunk with empty `choices` when the request asked for it with
`stream_options.include_usage`, and `data: [DONE]`. Usage: `prompt_tokens` is the whole prompt,
`prompt_tokens_details.cached_tokens` its cached prefix.
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

PROTOCOL: Final = "openai-chat"
ID_PREFIX = "chatcmpl-"
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    529: ("server_error", "overloaded"),
}


def _tool_calls(items: Any) -> tuple[ToolCall, ...]:
    calls = []
    for item in items or ():
        function = item.get("function") if isinstance(item, Mapping) else None
        if not isinstance(function, Mapping):
            raise BadRequest("each assistant tool call needs a 'function'")
        arguments, raw = parse_arguments(function.get("arguments", ""))
        calls.append(ToolCall(str(item.get("id", "")), str(function.get("name", "")), arguments, raw))
    return tuple(calls)


def _tools(body: Mapping[str, Any]) -> tuple[tuple[ToolSpec, ...], dict[str, str]]:
    specs, kinds = [], {}
    for tool in list(body.get("tools") or ()) + [
        {"type": "function", "function": f} for f in body.get("functions") or ()
    ]:
        if not isinstance(tool, Mapping):
            raise BadRequest("each tool must be an object")
        kind = tool.get("type", "function")
        if kind == "function":
            function = require(tool, "function", Mapping)
            name = require(function, "name", str)
            specs.append(
                ToolSpec(name, str(function.get("description") or ""), dict(function.get("parameters") or {}))
            )
        else:
            detail: Mapping[str, Any] = tool[kind] if isinstance(tool.get(kind), Mapping) else tool
            name = str(detail.get("name") or kind)
            kinds[name] = str(kind)
            specs.append(ToolSpec(name, f"[{kind}] {detail.get('description') or ''}".strip(), {}))
    return tuple(specs), kinds


def parse(body: Mapping[str, Any]) -> WireRequest:
    model = model_of(body)
    system: list[str] = []
    messages: list[Message] = []
    tool_names: dict[str, str] = {}
    for item in require(body, "messages", list):
        role = item.get("role") if isinstance(item, Mapping) else None
        if role in ("system", "developer"):
            system.append(flatten_text(item.get("content")))
        elif role == "user":
            messages.append(Message(role="user", content=flatten_text(item.get("content"))))
        elif role == "assistant":
            calls = _tool_calls(item.get("tool_calls"))
            tool_names.update((c.id, c.name) for c in calls)
            messages.append(
                Message(role="assistant", content=flatten_text(item.get("content")), tool_calls=calls)
            )
        elif role in ("tool", "function"):
            call_id = str(item.get("tool_call_id") or item.get("name") or "")
            content = flatten_text(item.get("content"))
            messages.append(
                Message(role="tool", content=content, tool_call_id=call_id, name=tool_names.get(call_id))
            )
        else:
            raise BadRequest(f"unknown message role {role!r}")
    tools, kinds = _tools(body)
    options: Mapping[str, Any] = (
        body["stream_options"] if isinstance(body.get("stream_options"), Mapping) else {}
    )
    return WireRequest(
        Conversation(PROTOCOL, model, "\n\n".join(system), tuple(messages), tools),
        stream=bool(body.get("stream")),
        include_usage=bool(options.get("include_usage")),
        tool_kinds=kinds,
    )


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def render(request: WireRequest, reply: Reply, usage: Usage, ids: Ids) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if not reply.tool_calls:
        message["content"] = reply.text
    else:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(c)}}
            for c in reply.tool_calls
        ]
    return {
        "id": ids.response,
        "object": "chat.completion",
        "created": ids.created,
        "model": request.conversation.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(reply)}
        ],
        "usage": usage_json(usage),
    }


def render_stream(
    request: WireRequest, reply: Reply, usage: Usage, ids: Ids, chunk_tokens: int
) -> list[Frame]:
    base = {
        "id": ids.response,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": request.conversation.model,
    }
    if request.include_usage:
        base["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])

    frames = [Frame(sse(None, chunk({"role": "assistant", "content": "", "refusal": None})))]
    content = Stamp(None, chunk({"content": DELTA}))
    frames += [Frame(content.fill(piece), tokens) for piece, tokens in chunk_text(reply.text, chunk_tokens)]
    for index, call in enumerate(reply.tool_calls):
        opening = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        frames.append(Frame(sse(None, chunk({"tool_calls": [opening]}))))
        arguments = Stamp(None, chunk({"tool_calls": [{"index": index, "function": {"arguments": DELTA}}]}))
        frames += [
            Frame(arguments.fill(p), tokens) for p, tokens in chunk_text(arguments_text(call), chunk_tokens)
        ]
    frames.append(Frame(sse(None, chunk({}, finish=_finish_reason(reply)))))
    if request.include_usage:
        frames.append(Frame(sse(None, dict(base, choices=[], usage=usage_json(usage)))))
    frames.append(Frame(sse(None, "[DONE]")))
    return frames


def error_body(status: int, message: str) -> dict[str, Any]:
    kind, code = _ERROR_TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
