"""The contract between the fake server and its responders (what answers a request).

The server parses every request, whatever its wire protocol, into a neutral `Conversation`; a
responder returns a `Reply`; the server renders it back on the same protocol (streamed or not), with
usage. Responders decide from the conversation alone: they never read the file system, the clock or
the network, so the same conversation (and seed) always gets the same reply.

Not to be confused with the agent loop's policies (`hilbert.agent.policies`): a responder plays the
model, on the far side of the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from hilbert.models.types import Message, ToolCall, ToolSpec

Protocol_ = Literal["anthropic", "openai-chat", "openai-responses"]


@dataclass(frozen=True)
class Conversation:
    """A request as a responder sees it. `system` is the system prompt (or instructions); `messages`
    excludes it. `tools` are the function tools offered, by their wire names."""

    protocol: Protocol_
    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]


@dataclass(frozen=True)
class Reply:
    """What the model says: text, tool calls (several allowed), or both."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


class Responder(Protocol):
    @property
    def name(self) -> str: ...

    def reply(self, conversation: Conversation) -> Reply: ...
