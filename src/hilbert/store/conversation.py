"""Rebuilding an agent's conversation from its committed events.

The rule (the write-ahead contract with the agent loop): `agent_started` sets the conversation to its
initial messages; each `model_call` sets it to exactly the messages it sent plus the reply; each
`tool_result` and `message_injected` appends its message. Hence the conversation after any committed
event is a function of the log alone, which is what resume, the judge and the views build on.
"""

from __future__ import annotations

from hilbert.errors import UserError
from hilbert.models.types import Message
from hilbert.store.event_store import EventStore
from hilbert.store.kinds import AGENT_STARTED, CONVERSATION_KINDS, MODEL_CALL


def rebuild_conversation(
    store: EventStore, run: str, agent: str, *, upto_id: int | None = None
) -> list[Message]:
    """The conversation of `agent` in `run` as it stood after its last event with `id <= upto_id`
    (after its newest event when `upto_id` is None). Raises `UserError` for an unknown agent."""
    hashes: list[str] = []
    for event in store.events(run=run, agent=agent, kinds=CONVERSATION_KINDS, upto_id=upto_id):
        if event.kind == AGENT_STARTED:
            hashes = list(event.data["messages"])
        elif event.kind == MODEL_CALL:
            hashes = [*event.data["request"], event.data["response"]]
        else:  # tool_result, message_injected
            hashes.append(event.data["message"])
    if not hashes and not store.events(run=run, agent=agent, upto_id=upto_id, limit=1):
        raise UserError(
            f"run {run!r} has no agent {agent!r}" + ("" if upto_id is None else f" up to event {upto_id}"),
            hint=f"`hilbert log --run {run}` lists its agents",
        )
    return store.get_messages(hashes)


def every_turn(store: EventStore, run: str, agent: str) -> list[Message]:
    """Every message `agent`'s conversation held in `run`, in order, each once: its first messages,
    each reply, each tool result and injected message — also those a compaction dropped later (what
    it did, not what it last sent)."""
    hashes: list[str] = []
    for event in store.events(run=run, agent=agent, kinds=CONVERSATION_KINDS):
        if event.kind == AGENT_STARTED:
            hashes += [h for h in event.data["messages"] if h not in hashes]
        elif event.kind == MODEL_CALL:
            hashes.append(event.data["response"])
        else:  # tool_result, message_injected
            hashes.append(event.data["message"])
    return store.get_messages(hashes)
