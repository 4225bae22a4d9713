"""The loop's one door for what a model reads: every message but the harness's own envelopes, defanged.

Whoever wrote a text — a tool's output, the task, a reminder's checklist, the stop gate's feedback and
restore hint (which quote file names a worker chose), the system prompt with its repository map, a
policy added tomorrow — it reaches the model through `Defanging`, so a caller that forgets cannot forge an
envelope (`hilbert.security.envelope.defang`). The loop `admit`s each message as it enters the
conversation (so the log holds what the model read) and passes what it sends through the same door once
more (`__call__`: a policy's `shape` may add messages of its own, compaction's summaries and masks).

The one exception is an envelope the harness delivered: a message an `Inject` brings with a `source` (the
`Inbox`, delivering a stored, signed message) whose text is exactly one well-formed envelope
(`is_envelope`) goes through as it is, so the sender and role it names stay readable. On a resume, the
envelopes of the rebuilt history are let through when the log shows they were delivered so
(`delivered_in_log`). The model's own replies are its words, not text it reads, and pass as they are.

Defanging is a pure function of the text, and a message defanged once is a fixed point: the conversation
is the same bytes at every turn, as prompt caching needs. A memo (by message object) keeps the per-turn
pass cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from hilbert.models.types import Message
from hilbert.security.envelope import defang, is_envelope
from hilbert.store import EventStore

_MEMO = 8192  # messages remembered; a conversation sent again every turn hits it


class Defanging:
    def __init__(self) -> None:
        self.envelopes: set[str] = set()  # texts of envelopes the harness delivered
        self._memo: dict[int, tuple[Message, Message]] = {}

    def admit(self, message: Message, *, delivered: bool = False) -> Message:
        """`message` as the model may read it; `delivered`: the harness delivered it (an inbox message),
        so an envelope in it is genuine."""
        if delivered and message.role == "user" and is_envelope(message.content):
            self.envelopes.add(message.content)
            return message
        return self.inert(message)

    def inert(self, message: Message) -> Message:
        if message.role == "assistant" or message.content in self.envelopes:
            return message
        seen = self._memo.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1]
        content = defang(message.content)
        result = message if content == message.content else replace(message, content=content)
        for key, value in ((message, result), (result, result)):
            if len(self._memo) >= _MEMO:
                del self._memo[next(iter(self._memo))]
            self._memo[id(key)] = (key, value)  # the message is kept: its id cannot be reused
        return result

    def __call__(self, messages: Iterable[Message]) -> list[Message]:
        """What to send: `messages`, each through the door."""
        return [self.inert(message) for message in messages]


def delivered_in_log(store: EventStore, run: str, agent: str) -> set[str]:
    """The hashes of the messages the loop injected for `agent` with a source (delivered messages)."""
    injected = store.events(run=run, agent=agent, kinds=["message_injected"])
    return {str(e.data["message"]) for e in injected if e.data.get("source")}


def admit_history(
    door: Defanging, history: Sequence[Message], hashes: Sequence[str], delivered: set[str]
) -> list[Message]:
    """A rebuilt conversation through `door`: an envelope the log shows delivered (by hash) is genuine."""
    return [door.admit(m, delivered=h in delivered) for m, h in zip(history, hashes, strict=True)]


__all__ = ["Defanging", "admit_history", "delivered_in_log"]
