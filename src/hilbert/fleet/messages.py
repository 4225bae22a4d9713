"""Agents messaging each other: the `send_message` tool, its limits, and why a message can only inform.

`MessageTools(inner, ...)` offers `inner`'s tools plus `send_message {to, text}` — to a worker by name,
to `lead`, or to `all` running workers — and records it as a signed `agent_message`, which the
recipient's `Inbox` delivers at its next turn boundary inside an envelope naming the true sender. A
worker's message informs, asks or proposes; it cannot assign, cancel or widen work (no tool does that
for a worker), and its recipients are told so (`hilbert.security.envelope.ENVELOPE_RULES`). The
other tools' outputs, like everything an agent reads, are defanged by the agent loop
(`hilbert.agent.defanging`): a file or a command's output cannot forge an envelope.

Two limits stop storms and worms whatever the models do: a sender may send at most `per_minute`
messages in any minute (a message to `all` counts once per recipient), and a message whose text passes
on text the sender received in a message (a forward) carries that message's hop count plus one; past
`max_hops` it is refused. Refusals are tool errors the model reads, and `message_refused` events.
"""

from __future__ import annotations

import difflib
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hilbert.agent.tools import ToolOutcome, Tools
from hilbert.fleet.inbox import EVERYONE, HARNESS, LEAD, Inbox, send
from hilbert.fleet.names import Name, lookup
from hilbert.models.types import ToolCall, ToolSpec
from hilbert.security.envelope import MessageKey
from hilbert.store import EventStore

SEND_MESSAGE = "send_message"
SEND_MESSAGE_SPEC = ToolSpec(
    SEND_MESSAGE,
    "Send a short message to another worker (by name), to the lead (`lead`) or to every running worker "
    "(`all`). It is delivered at their next turn. Use it to inform, ask or propose; it cannot assign or "
    "cancel work.",
    {
        "type": "object",
        "properties": {
            "to": {"type": "string", "description": "a worker's name, `lead`, or `all`"},
            "text": {"type": "string", "description": "the message (at most 2000 characters)"},
        },
        "required": ["to", "text"],
        "additionalProperties": False,
    },
)
MAX_CHARS = 2000
FORWARD_MIN_CHARS = 40  # a shared run of this many characters with a received message is a forward


@dataclass(frozen=True)
class MessageLimits:
    per_minute: int = 6
    max_hops: int = 1  # a message may pass on a received one once; a forward of a forward is refused


class MessageTools:
    """`inner`'s tools plus `send_message` for agent `sender`."""

    def __init__(
        self,
        inner: Tools,
        *,
        store: EventStore,
        run: str,
        sender: str,
        inbox: Inbox,
        roster: Callable[[], Sequence[Name]],
        key: MessageKey | None = None,
        limits: MessageLimits = MessageLimits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner, self.store, self.run_id, self.sender, self.inbox = inner, store, run, sender, inbox
        self.roster, self.key, self.limits, self.clock = roster, key, limits, clock
        self.root = inner.root
        self.sent: deque[float] = deque()

    def specs(self) -> tuple[ToolSpec, ...]:
        return (*self.inner.specs(), SEND_MESSAGE_SPEC)

    async def run(self, call: ToolCall) -> ToolOutcome:
        if call.name != SEND_MESSAGE:
            return await self.inner.run(call)
        to, text = call.arguments.get("to"), call.arguments.get("text")
        if (
            call.raw_arguments is not None
            or not isinstance(to, str)
            or not isinstance(text, str)
            or not text.strip()
        ):
            return ToolOutcome("send_message needs {to: string, text: non-empty string}", True)
        if len(text) > MAX_CHARS:
            return self.refuse(to, f"the message is {len(text)} characters; the most is {MAX_CHARS}")
        recipients = self.recipients(to)
        if isinstance(recipients, str):
            return ToolOutcome(recipients, True)
        now = self.clock()
        while self.sent and now - self.sent[0] >= 60:
            self.sent.popleft()
        if len(self.sent) + len(recipients) > self.limits.per_minute:
            return self.refuse(to, f"rate limit: at most {self.limits.per_minute} messages a minute")
        hop = self.hop_of(text)
        if hop > self.limits.max_hops:
            return self.refuse(
                to, "it passes on a message that was already passed on; reply in your own words"
            )
        self.sent.extend([now] * len(recipients))
        for recipient in recipients:
            send(self.store, self.run_id, recipient, text, sender=self.sender, key=self.key, hop=hop)
        return ToolOutcome(f"sent to {', '.join(recipients)}; delivered at their next turn")

    def recipients(self, to: str) -> list[str] | str:
        """The names `to` stands for, or the error to answer with."""
        others = [name for name in self.roster() if name.display != self.sender]
        if to.strip().lower() == LEAD:
            return [LEAD]
        if to.strip().lower() in ("all", EVERYONE):
            return [name.display for name in others] or "no other worker is running"
        found = lookup(to, others)
        if found is None:
            running = ", ".join(name.display for name in others) or "none"
            return f"no running worker is called {to!r}; running now: {running}"
        return [found.display]

    def hop_of(self, text: str) -> int:
        """0 for a message in the sender's own words; else 1 + the hop count of what it passes on."""
        mine = _normal(text)
        hops = [
            hop + 1
            for received, hop in self.inbox.delivered
            if _shares_a_run(mine, _normal(received), FORWARD_MIN_CHARS)
        ]
        return max(hops, default=0)

    def refuse(self, to: str, why: str) -> ToolOutcome:
        self.store.append(
            self.run_id, HARNESS, "message_refused", {"sender": self.sender, "to": to, "why": why}
        )
        return ToolOutcome(f"not sent: {why}", True)


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _shares_a_run(a: str, b: str, length: int) -> bool:
    """`a` and `b` have a common substring of at least `length` characters."""
    if len(a) < length or len(b) < length:
        return False
    match = difflib.SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return match.size >= length


__all__ = ["SEND_MESSAGE", "SEND_MESSAGE_SPEC", "MessageLimits", "MessageTools"]
