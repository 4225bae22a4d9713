"""What the person says to a running fleet: messages and stop requests, delivered at turn boundaries.

`hilbert send` and `hilbert stop` (any process) append `person_message` / `stop_requested` events to
the run's log through the store's defined write path, and the lead's `message_worker` tool appends a
`lead_message`, and the fleet's liveness watch a `worker_nudged` (sender: the harness); each agent's
`Inbox` policy reads the new ones before its next model call. A stop halts
the agent (its work is kept: the harness commits and archives it); a message is injected as a user turn
saying who sent it (the sender as the harness knows it, never as the text claims). Peer messages,
provenance envelopes and authority rules are issue 5's.
"""

from __future__ import annotations

from collections.abc import Sequence

from hilbert.agent.policies import Action, Halt, Inject, LoopState, Policy
from hilbert.models.types import Message
from hilbert.store import EventStore

PERSON = "person"
LEAD = "lead"
HARNESS = "harness"
PERSON_MESSAGE = "person_message"
LEAD_MESSAGE = "lead_message"
NUDGE = "worker_nudged"
_KINDS = {PERSON: PERSON_MESSAGE, LEAD: LEAD_MESSAGE, HARNESS: NUDGE}
_FROM = {PERSON_MESSAGE: "the person running hilbert", LEAD_MESSAGE: "the lead", NUDGE: "the harness"}
STOP_REQUESTED = "stop_requested"
EVERYONE = "*"
STOPPED_BY_PERSON = "the person asked this agent to stop"


def send(store: EventStore, run: str, to: str, text: str, *, sender: str = PERSON) -> None:
    """Record a message from `sender` (the person, the lead or the harness) to agent `to` (or EVERYONE)."""
    store.append(run, sender, _KINDS[sender], {"to": to, "text": text})


def request_stop(store: EventStore, run: str, to: str = EVERYONE) -> None:
    store.append(run, PERSON, STOP_REQUESTED, {"to": to})


def stop_requested(store: EventStore, run: str, to: str = EVERYONE) -> bool:
    return any(e.data.get("to") in (to, EVERYONE) for e in store.events(run=run, kinds=[STOP_REQUESTED]))


class Inbox(Policy):
    """Delivers the person's and the lead's messages to `agent` and halts it when a stop is requested."""

    name = "inbox"

    def __init__(self, store: EventStore, run: str, agent: str) -> None:
        self.store, self.run, self.agent = store, run, agent
        self.seen = store.last_id()

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        actions: list[Action] = []
        for event in self.store.events(
            run=self.run, kinds=[PERSON_MESSAGE, LEAD_MESSAGE, NUDGE, STOP_REQUESTED], after_id=self.seen
        ):
            self.seen = event.id
            if event.data.get("to") not in (self.agent, EVERYONE):
                continue
            if event.kind == STOP_REQUESTED:
                return [*actions, Halt(STOPPED_BY_PERSON)]
            sender = _FROM[event.kind]
            actions.append(Inject(Message("user", f"Message from {sender}: {event.data['text']}")))
        return actions
