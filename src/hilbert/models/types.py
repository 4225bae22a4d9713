"""Provider-neutral conversation types and the one `Model` seam.

Everything above the wire (the loop, the store, policies, the fake server's responders) speaks these
types; the adapters in this package translate them to and from one provider's wire format and hold
no policy. Data types are frozen dataclasses; `to_json`/`from_json` serialise them at the edges.

Token accounting convention (`Usage`): `input_tokens` is the *whole* prompt, cached part included;
`cache_read_tokens` and `cache_write_tokens` are the parts of it read from / written to the
provider's prompt cache. Adapters normalise to this whatever the provider reports (Anthropic reports
the three parts separately; OpenAI reports the total and a cached subset).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """One tool call requested by the model. `arguments` is the parsed JSON object; when the model
    sent arguments that are not a JSON object, `arguments` is empty and `raw_arguments` keeps the
    text so the loop can answer with a clear tool error."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: name, description and a JSON-schema object for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Message:
    """One conversation turn.

    - system / user: `content` is the text.
    - assistant: `content` is the text (may be empty) and `tool_calls` the calls it asks for.
    - tool: the result of the call `tool_call_id` (tool `name`); `is_error` marks a refused or failed call.

    `cache_point`: the prompt up to and including this message is a prefix that will be sent again
    unchanged (the compaction marks the task state it restates after a cut), so a provider with explicit
    cache breakpoints (Anthropic's `cache_control`) should put one here.
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    cache_point: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [asdict(c) for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.is_error:
            data["is_error"] = True
        if self.cache_point:
            data["cache_point"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=tuple(ToolCall(**c) for c in data.get("tool_calls", ())),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            is_error=bool(data.get("is_error", False)),
            cache_point=bool(data.get("cache_point", False)),
        )


@dataclass(frozen=True)
class Usage:
    """Tokens of one call (see the module docstring for the convention)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "other"]


@dataclass(frozen=True)
class Completion:
    """What one model call returned, with its measurements."""

    message: Message
    usage: Usage
    stop_reason: StopReason
    model: str
    cost_usd: float = 0.0
    latency_s: float = 0.0
    time_to_first_token_s: float | None = None
    attempts: int = 1
    priced: bool = True  # the price table knows the model (False: `cost_usd` 0 says nothing)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["message"] = self.message.to_json()
        return data


TextCallback = Callable[[str], None]


class Model(Protocol):
    """The one seam to a language model. An adapter translates, retries and measures; it decides
    nothing about the conversation."""

    name: str

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> Completion:
        """Send the conversation (first message may be the system prompt) and return the reply.
        `on_text` receives streamed text deltas as they arrive. Raises `ModelError` subclasses
        (never an SDK exception) once retries are exhausted."""
        ...
