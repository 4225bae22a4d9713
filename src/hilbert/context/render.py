"""One canonical token sequence per message, so every strategy is measured with the same ruler.

A message counts as its role's framing (three tokens: start, role, end — what OpenAI documents as the
per-message overhead of its chat format) plus the tokens of its text: the content, then each tool call
as `name(arguments as JSON)`, then for a tool result its tool's name. The framing ids are negative, so
they never collide with a real token id; they take part in prefix comparisons like any other token.

`TokenCache(tokenizer)` encodes each distinct message once: a replay asks for the same message at every
later call, and a live agent's history only grows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hilbert.context.tokens import Tokenizer
from hilbert.models.types import Message

_START, _END = -1, -2
_ROLES = {"system": -10, "user": -11, "assistant": -12, "tool": -13}


def render(message: Message) -> str:
    """The text of `message` that is tokenized (its framing is added as tokens, not text)."""
    parts = [message.content]
    parts += [
        f"{c.name}({json.dumps(c.arguments, sort_keys=True, ensure_ascii=False)})" for c in message.tool_calls
    ]
    if message.role == "tool" and message.name:
        parts.insert(0, f"[{message.name}]")
    return "\n".join(p for p in parts if p)


@dataclass
class TokenCache:
    tokenizer: Tokenizer
    _seen: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)

    def tokens(self, message: Message) -> tuple[int, ...]:
        key = (message.role, render(message))
        found = self._seen.get(key)
        if found is None:
            found = (_START, _ROLES[message.role], *self.tokenizer.encode(key[1]), _END)
            self._seen[key] = found
        return found

    def count(self, message: Message) -> int:
        return len(self.tokens(message))

    def total(self, messages: list[Message] | tuple[Message, ...]) -> int:
        return sum(self.count(m) for m in messages)


__all__ = ["TokenCache", "render"]
