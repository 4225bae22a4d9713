"""What the three wire modules share: the parsed request, SSE frames, ids and small JSON helpers.

Each wire module (`anthropic_wire`, `openai_chat_wire`, `openai_responses_wire`) exposes the same
four functions, which `app.py` calls without knowing the protocol:

    parse(body) -> WireRequest                         the request as a neutral Conversation
    render(request, reply, usage, ids) -> dict         a non-streamed response body
    render_stream(request, reply, usage, ids, chunk_tokens) -> list[Frame]   the SSE frames, in order
    error_body(status, message) -> dict                the provider's error JSON

and the constants `PROTOCOL` (as in `Conversation.protocol`) and `ID_PREFIX` (of response ids).

A malformed request raises `BadRequest`, which the app answers with a 400 in the provider's shape.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hilbert.models.types import ToolCall
from hilbert.testing.fake_server.responder import Conversation


class BadRequest(Exception):
    """The request body does not follow the protocol; the message is sent back to the client."""


@dataclass(frozen=True)
class WireRequest:
    """A parsed request: the conversation and what rendering the reply needs from the request.
    `tool_kinds` maps a tool name to its wire type when it is not a plain function tool."""

    conversation: Conversation
    stream: bool
    include_usage: bool = False
    tool_kinds: Mapping[str, str] = field(default_factory=dict)
    tools_json: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Frame:
    """One SSE event, and how many output tokens it carries (the app paces the stream by them)."""

    data: bytes
    tokens: int = 0


@dataclass(frozen=True)
class Ids:
    """Identifiers and the timestamp of one response: `token` is random hex shared by its ids."""

    prefix: str
    token: str
    created: int

    @classmethod
    def new(cls, prefix: str) -> Ids:
        return cls(prefix=prefix, token=secrets.token_hex(12), created=int(time.time()))

    @property
    def response(self) -> str:
        return self.prefix + self.token

    def item(self, prefix: str, index: int) -> str:
        return f"{prefix}{self.token}{index:02d}"


def sse(event: str | None, payload: Any) -> bytes:
    """One server-sent event: an optional `event:` line and one `data:` line (JSON, or a bare string)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return (f"event: {event}\n" if event else "").encode() + b"data: " + data.encode() + b"\n\n"


DELTA = "\ue000delta\ue000"
SEQUENCE = "\ue000seq\ue000"
_DELTA_HOLE = json.dumps(DELTA).encode()
_SEQUENCE_HOLE = json.dumps(SEQUENCE).encode()


class Stamp:
    """An SSE frame with holes, encoded once and filled per chunk: `DELTA` where the text piece goes,
    `SEQUENCE` where a sequence number goes. (Encoding a dict per chunk was the hot spot at 1,024
    concurrent streams.)"""

    def __init__(self, event: str | None, payload: Any) -> None:
        self.template = sse(event, payload)

    def fill(self, delta: str, sequence: int | None = None) -> bytes:
        frame = self.template
        if sequence is not None:
            frame = frame.replace(_SEQUENCE_HOLE, str(sequence).encode())
        return frame.replace(_DELTA_HOLE, json.dumps(delta).encode())


def arguments_text(call: ToolCall) -> str:
    """The arguments as the model would send them: `raw_arguments` when set, else compact JSON."""
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)


def parse_arguments(text: Any) -> tuple[dict[str, Any], str | None]:
    """Wire arguments (JSON text or an object) → (`arguments`, `raw_arguments`) as ToolCall keeps them."""
    if isinstance(text, Mapping):
        return dict(text), None
    if not isinstance(text, str):
        return {}, json.dumps(text)
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {}, text
    return (value, None) if isinstance(value, dict) else ({}, text)


def flatten_text(content: Any) -> str:
    """Text of a content field: a string, or a list of blocks/parts (text kept, others named)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content)
    texts = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping):
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_result":
                texts.append(flatten_text(block.get("content")))
            else:
                texts.append(f"[{block.get('type', 'block')}]")
    return "\n".join(texts)


def require(body: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(key)
    if not isinstance(value, kind):
        raise BadRequest(f"'{key}' is required and must be a {getattr(kind, '__name__', 'valid value')}")
    return value


def model_of(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required")
    return model


def check_tool_results(conversation: Conversation) -> None:
    """Refuse what the real APIs refuse: an assistant turn's tool calls must be answered, each once,
    by tool results that come right after it, before any other message."""
    messages = conversation.messages
    for i, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls or i + 1 == len(messages):
            continue
        wanted = [call.id for call in message.tool_calls]
        answered = []
        for following in messages[i + 1 :]:
            if following.role != "tool":
                break
            answered.append(following.tool_call_id)
        if sorted(answered, key=str) != sorted(wanted, key=str):
            raise BadRequest(
                f"tool calls {wanted} must be answered right after the assistant turn by one tool result "
                f"each, before any other message; got results for {answered}"
            )
