"""Agents messaging each other: the `send_message` tool, its limits, and why a message can only inform.

`MessageTools(inner, ...)` offers `inner`'s tools plus `send_message {to, text}` — to a worker by name,
to `lead`, or to `all` running workers — and records it as a signed `agent_message`, which the
recipient's `Inbox` delivers at its next turn boundary inside an envelope naming the true sender. A
worker's message informs, asks or proposes; it cannot assign, cancel or widen work (no tool does that
for a worker), and its recipients are told so (`hilbert.security.envelope.ENVELOPE_RULES`). The
other tools' outputs, like everything an agent reads, are defanged by the agent loop
(`hilbert.agent.defanging`): a file or a command's output cannot forge an envelope.

Two limits stop storms and worms whatever the models do: a sender may send at most `per_minute`
messages in any minute (a message to `all` counts once per recipient), and a message is at most
`max_hops` messages deep. Its hop follows information flow, not its text (a worm that rewords itself at
each hop is counted as well as one that forwards itself): `next_hop` reads from the log which messages of
other agents (workers' and the lead's) the sender was shown (`message_injected` events naming them as
their `source`) and gives 1 + the deepest one's hop, or 0 when it was shown none. The person's and the
harness's messages start no chain. A worker's hops count over its attempt (a worker's name is its
attempt's); the lead's over its session (`hilbert.fleet.lead`: its messages are never refused, but a
worker that read one counts from its hop). Read from the log, the hops survive a resume. Refusals are
tool errors the model reads, and `message_refused` events.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hilbert.agent.tools import ToolOutcome, Tools
from hilbert.fleet.inbox import AGENT_MESSAGE, EVERYONE, HARNESS, LEAD, LEAD_MESSAGE, send
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
FROM_AGENTS = (AGENT_MESSAGE, LEAD_MESSAGE)  # messages a model wrote: they carry a hop


@dataclass(frozen=True)
class MessageLimits:
    per_minute: int = 6
    # hop 0 (read no agent's message), a reply (1), and one answer to that (2): a question from the lead
    # (who may have read a worker's message) answered, or a worker's question to a peer answered and
    # followed up; a chain A→B→C→D stops at D
    max_hops: int = 2


class MessageTools:
    """`inner`'s tools plus `send_message` for agent `sender`."""

    def __init__(
        self,
        inner: Tools,
        *,
        store: EventStore,
        run: str,
        sender: str,
        roster: Callable[[], Sequence[Name]],
        key: MessageKey | None = None,
        limits: MessageLimits = MessageLimits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner, self.store, self.run_id, self.sender = inner, store, run, sender
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
        hop = next_hop(self.store, self.run_id, self.sender)
        if hop > self.limits.max_hops:
            return self.refuse(
                to,
                f"it would be {hop} messages deep (you have read a message {hop - 1} deep; at most "
                f"{self.limits.max_hops}): chains of messages stop here, whatever their words",
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

    def refuse(self, to: str, why: str) -> ToolOutcome:
        self.store.append(
            self.run_id, HARNESS, "message_refused", {"sender": self.sender, "to": to, "why": why}
        )
        return ToolOutcome(f"not sent: {why}", True)


def next_hop(store: EventStore, run: str, agent: str, *, since: int = 0) -> int:
    """The hop of a message `agent` sends now: 1 + the highest hop of the workers' and the lead's
    messages it was shown after event `since` (its `message_injected` events name them), 0 if none."""
    deepest = -1
    for shown in store.events(run=run, agent=agent, kinds=["message_injected"], after_id=since):
        source = int(shown.data.get("source") or 0)
        if source:
            for message in store.events(run=run, kinds=FROM_AGENTS, after_id=source - 1, upto_id=source):
                deepest = max(deepest, int(message.data.get("hop") or 0))
    return deepest + 1


__all__ = ["SEND_MESSAGE", "SEND_MESSAGE_SPEC", "MessageLimits", "MessageTools", "next_hop"]
