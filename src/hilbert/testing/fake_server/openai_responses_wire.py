"""OpenAI Responses on the wire (`POST /v1/responses`), as Codex CLI and the openai SDK speak it.

Parsing: `instructions` and `system`/`developer` input messages form the system prompt; `input` is a
string or a list of items. Consecutive assistant items (messages, `function_call`,
`custom_tool_call`, `local_shell_call`; reasoning items are skipped) form one assistant turn; their
`*_output` items become tool results. A `custom_tool_call`'s free-text input is kept as the call's
`raw_arguments`. Function tools become `ToolSpec`s; other tools (`custom`, `local_shell`,
`web_search`, ...) are kept by name with `[type]` leading the description.

Rendering: output items in order (a message with the text, then one item per tool call: a
`function_call`, or a `custom_tool_call` / `local_shell_call` when the request offered the tool with
that type). A custom call's input is `raw_arguments`, else `arguments["input"]`, else the JSON. The
stream is the sequence the SDK's `ResponseStreamState` checks: response.created, response.in_progress,
per item output_item.added, its deltas and done events, output_item.done, then response.completed
carrying the full response and usage (`input_tokens_details.cached_tokens` is the cached prefix).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from hilbert.models.types import Message, ToolCall, ToolSpec, Usage
from hilbert.testing.fake_server.responder import Conversation, Reply
from hilbert.testing.fake_server.usage import chunk_text
from hilbert.testing.fake_server.wire import (
    DELTA,
    SEQUENCE,
    BadRequest,
    Frame,
    Ids,
    Stamp,
    WireRequest,
    arguments_text,
    flatten_text,
    model_of,
    parse_arguments,
    sse,
)

PROTOCOL: Final = "openai-responses"
ID_PREFIX = "resp_"
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


class _Turns:
    """Builds the message list, merging consecutive assistant items into one assistant turn."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []

    def flush(self) -> None:
        if self.texts or self.calls:
            self.messages.append(Message("assistant", "\n".join(self.texts), tuple(self.calls)))
            self.texts, self.calls = [], []

    def add(self, message: Message) -> None:
        self.flush()
        self.messages.append(message)


def _call(item: Mapping[str, Any], kind: str) -> ToolCall:
    call_id = str(item.get("call_id") or item.get("id") or "")
    if kind == "custom_tool_call":
        return ToolCall(call_id, str(item.get("name", "")), {}, str(item.get("input", "")))
    if kind == "local_shell_call":
        action: Mapping[str, Any] = item["action"] if isinstance(item.get("action"), Mapping) else {}
        return ToolCall(call_id, "local_shell", dict(action))
    arguments, raw = parse_arguments(item.get("arguments", ""))
    return ToolCall(call_id, str(item.get("name", "")), arguments, raw)


def _tools(body: Mapping[str, Any]) -> tuple[tuple[ToolSpec, ...], dict[str, str]]:
    specs, kinds = [], {}
    for tool in body.get("tools") or ():
        if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str):
            raise BadRequest("each tool must be an object with a 'type'")
        kind, name = tool["type"], str(tool.get("name") or tool["type"])
        if kind == "function":
            specs.append(
                ToolSpec(name, str(tool.get("description") or ""), dict(tool.get("parameters") or {}))
            )
        else:
            kinds[name] = kind
            specs.append(ToolSpec(name, f"[{kind}] {tool.get('description') or ''}".strip(), {}))
    return tuple(specs), kinds


def parse(body: Mapping[str, Any]) -> WireRequest:
    model = model_of(body)
    system = [flatten_text(body["instructions"])] if body.get("instructions") else []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' is required and must be a string or a list of items")
    turns, tool_names = _Turns(), {}
    for item in items:
        if not isinstance(item, Mapping):
            raise BadRequest("each input item must be an object")
        kind = item.get("type") or ("message" if "role" in item else None)
        role = item.get("role")
        if kind == "message" and role in ("system", "developer"):
            system.append(flatten_text(item.get("content")))
        elif kind == "message" and role == "assistant":
            turns.texts.append(flatten_text(item.get("content")))
        elif kind == "message":
            turns.add(Message("user", flatten_text(item.get("content"))))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call = _call(item, kind)
            tool_names[call.id] = call.name
            turns.calls.append(call)
        elif kind in _OUTPUT_TYPES:
            call_id = str(item.get("call_id") or item.get("id") or "")
            turns.add(Message("tool", flatten_text(item.get("output")), (), call_id, tool_names.get(call_id)))
    turns.flush()
    tools, kinds = _tools(body)
    conversation = Conversation(PROTOCOL, model, "\n\n".join(system), tuple(turns.messages), tools)
    tools_json = tuple(body.get("tools") or ())
    return WireRequest(conversation, stream=bool(body.get("stream")), tool_kinds=kinds, tools_json=tools_json)


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _custom_input(call: ToolCall) -> str:
    if call.raw_arguments is not None:
        return call.raw_arguments
    value = call.arguments.get("input")
    return value if isinstance(value, str) and len(call.arguments) == 1 else json.dumps(call.arguments)


def _items(request: WireRequest, reply: Reply, ids: Ids) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text or not reply.tool_calls:
        part = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        message = {"type": "message", "role": "assistant", "status": "completed", "content": [part]}
        items.append({"id": ids.item("msg_", 0), **message})
    for index, call in enumerate(reply.tool_calls, start=1):
        kind = request.tool_kinds.get(call.name, "function")
        item: dict[str, Any]
        if kind == "custom":
            item = {"type": "custom_tool_call", "id": ids.item("ctc_", index), "input": _custom_input(call)}
        elif kind == "local_shell":
            action = {"type": "exec", "command": [], "env": {}, **call.arguments}
            item = {"type": "local_shell_call", "id": ids.item("lsh_", index), "action": action}
        else:
            item = {"type": "function_call", "id": ids.item("fc_", index), "arguments": arguments_text(call)}
        items.append({**item, "call_id": call.id, "name": call.name, "status": "completed"})
    return items


def _response(request: WireRequest, ids: Ids, status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": ids.response,
        "object": "response",
        "created_at": ids.created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": request.conversation.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": list(request.tools_json),
        "text": {"format": {"type": "text"}},
        "usage": usage,
    }


def render(request: WireRequest, reply: Reply, usage: Usage, ids: Ids) -> dict[str, Any]:
    return _response(request, ids, "completed", _items(request, reply, ids), usage_json(usage))


def render_stream(
    request: WireRequest, reply: Reply, usage: Usage, ids: Ids, chunk_tokens: int
) -> list[Frame]:
    frames: list[Frame] = []

    def event(kind: str, tokens: int = 0, **fields: Any) -> None:
        frames.append(Frame(sse(kind, {"type": kind, "sequence_number": len(frames), **fields}), tokens))

    def deltas(kind: str, text: str, **where: Any) -> None:
        extra: dict[str, Any] = {"logprobs": []} if kind == "response.output_text.delta" else {}
        stamp = Stamp(kind, {"type": kind, "sequence_number": SEQUENCE, **where, "delta": DELTA, **extra})
        for piece, tokens in chunk_text(text, chunk_tokens):
            frames.append(Frame(stamp.fill(piece, len(frames)), tokens))

    event("response.created", response=_response(request, ids, "in_progress", [], None))
    event("response.in_progress", response=_response(request, ids, "in_progress", [], None))
    items = _items(request, reply, ids)
    for index, item in enumerate(items):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            part = item["content"][0]
            event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", content=[]),
            )
            event("response.content_part.added", **where, content_index=0, part=dict(part, text=""))
            deltas("response.output_text.delta", part["text"], **where, content_index=0)
            event("response.output_text.done", **where, content_index=0, text=part["text"], logprobs=[])
            event("response.content_part.done", **where, content_index=0, part=part)
        elif item["type"] == "function_call":
            event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", arguments=""),
            )
            deltas("response.function_call_arguments.delta", item["arguments"], **where)
            event(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=item["arguments"],
            )
        elif item["type"] == "custom_tool_call":
            event(
                "response.output_item.added",
                output_index=index,
                item=dict(item, status="in_progress", input=""),
            )
            deltas("response.custom_tool_call_input.delta", item["input"], **where)
            event("response.custom_tool_call_input.done", **where, input=item["input"])
        else:
            event("response.output_item.added", output_index=index, item=dict(item, status="in_progress"))
        event("response.output_item.done", output_index=index, item=item)
    event("response.completed", response=_response(request, ids, "completed", items, usage_json(usage)))
    return frames


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    code = {
        401: "invalid_api_key",
        404: "model_not_found",
        429: "rate_limit_exceeded",
        529: "overloaded",
    }.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
