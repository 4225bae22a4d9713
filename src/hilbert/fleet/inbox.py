"""What reaches a running agent between its turns: messages and stop requests.

`hilbert send` and `hilbert stop` (any process) append `person_message` / `stop_requested` events to the
run's log; the lead's `message_worker` tool appends a `lead_message`, the liveness watch a
`worker_nudged` (sender: the harness), a worker's `send_message` tool an `agent_message`
(`hilbert.fleet.messages`). Each agent's `Inbox` policy reads the new ones before its next model call.
A stop halts the agent (its work is kept: the harness commits and archives it); the harness asks for
one too, with its reason, for the worker whose workspace filled the disk (`hilbert.fleet.disk`). A
message is injected inside an envelope naming its sender and role as the harness knows them, never as
the text claims (`hilbert.security.envelope`). With the run's `MessageKey`, every message is signed
when written and checked when read: a row changed after it was written is not delivered (a
`message_rejected` event says so).
"""

from __future__ import annotations

from collections.abc import Sequence

from hilbert.agent.policies import Action, Halt, Inject, LoopState, Policy
from hilbert.models.types import Message
from hilbert.security.envelope import MessageKey, Role, envelope
from hilbert.store import EventStore
from hilbert.store.event_store import Event

PERSON = "person"
LEAD = "lead"
HARNESS = "harness"
PERSON_MESSAGE = "person_message"
LEAD_MESSAGE = "lead_message"
NUDGE = "worker_nudged"
AGENT_MESSAGE = "agent_message"
MESSAGE_KINDS = (PERSON_MESSAGE, LEAD_MESSAGE, NUDGE, AGENT_MESSAGE)
_KINDS = {PERSON: PERSON_MESSAGE, LEAD: LEAD_MESSAGE, HARNESS: NUDGE}
_ROLES: dict[str, Role] = {
    PERSON_MESSAGE: "person",
    LEAD_MESSAGE: "lead",
    NUDGE: "harness",
    AGENT_MESSAGE: "worker",
}
STOP_REQUESTED = "stop_requested"
EVERYONE = "*"
STOPPED_BY_PERSON = "the person asked this agent to stop"


def send(
    store: EventStore,
    run: str,
    to: str,
    text: str,
    *,
    sender: str = PERSON,
    key: MessageKey | None = None,
    hop: int = 0,
) -> None:
    """Record a message to agent `to` (or EVERYONE) from `sender`: the person, the lead, the harness, or
    (any other name) a worker; signed with `key` when the run has one. `hop`: how many messages deep it
    is, by what its sender had read (`hilbert.fleet.messages.next_hop`)."""
    kind = _KINDS.get(sender, AGENT_MESSAGE)
    record = {"run": run, "sender": sender, "role": _ROLES[kind], "to": to, "text": text, "hop": hop}
    record = store.redactor.redact_json(record)  # as the store will keep it, so the signature matches
    if key is not None:
        record["signature"] = key.sign(record)
    store.append(run, sender, kind, record)


def request_stop(store: EventStore, run: str, to: str = EVERYONE) -> None:
    store.append(run, PERSON, STOP_REQUESTED, {"to": to})


def stop_requested(store: EventStore, run: str, to: str = EVERYONE) -> bool:
    return any(e.data.get("to") in (to, EVERYONE) for e in store.events(run=run, kinds=[STOP_REQUESTED]))


class Inbox(Policy):
    """Delivers messages for `agent` (enveloped, signatures checked when the run has a key) and halts
    it when a stop is requested."""

    name = "inbox"

    def __init__(
        self,
        store: EventStore,
        run: str,
        agent: str,
        *,
        key: MessageKey | None = None,
        after: int = 0,
        joined: int | None = None,
    ) -> None:
        self.store, self.run, self.agent, self.key = store, run, agent, key
        # broadcasts and stops from before `joined` (default: now) are not this agent's
        self.joined = store.last_id() if joined is None else joined
        # a message addressed to this agent by name is delivered whenever it was sent, but those up to
        # `after` (delivered to a conversation the agent goes on with, e.g. at a resume)
        self.seen = after

    def _for_me(self, event: Event) -> bool:
        data = event.data
        if data.get("to") not in (self.agent, EVERYONE) or data.get("sender") == self.agent:
            return False
        return event.id > self.joined or (data.get("to") != EVERYONE and event.kind != STOP_REQUESTED)

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        actions: list[Action] = []
        for event in self.store.events(
            run=self.run, kinds=[*MESSAGE_KINDS, STOP_REQUESTED], after_id=self.seen
        ):
            self.seen = event.id
            data = event.data
            if not self._for_me(event):
                continue
            if event.kind == STOP_REQUESTED:
                return [*actions, Halt(str(data.get("why") or STOPPED_BY_PERSON), "person")]
            if self.key is not None and not self.key.verify(data):
                why = "its signature does not match: it was changed after it was written"
                self.store.append(
                    self.run, HARNESS, "message_rejected", {"id": event.id, "to": self.agent, "why": why}
                )
                continue
            role = _ROLES[event.kind]
            sender = str(data.get("sender") or event.agent)
            text = str(data.get("text", ""))
            actions.append(
                Inject(
                    Message("user", envelope(text, sender=sender, role=role, message_id=f"m-{event.id}")),
                    source=event.id,
                )
            )
        return actions
