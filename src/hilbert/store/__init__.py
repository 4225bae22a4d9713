"""The event store: hilbert's append-only event log and content-addressed message blobs (SQLite, WAL).

- `event_store`: `EventStore` (open, append, put/get messages, query, follow) and `Event`.
- `schema`: the migrations, as a list of functions.
- `blobs`: canonical JSON and the SHA-256 key of a blob.
- `kinds`: the event kinds the agent loop writes and the shape of their data (the contract).
- `conversation`: `rebuild_conversation`, an agent's conversation from its events; `every_turn`, all
  it ever held (also what compaction dropped).
- `summary`: `agent_summary`, an agent's progress and spend from its events.

It knows JSON, messages and usage; it knows nothing about models, tools or printing.
"""

from hilbert.store.conversation import every_turn, rebuild_conversation
from hilbert.store.event_store import Durability, Event, EventStore
from hilbert.store.summary import AgentSummary, agent_summary

__all__ = [
    "AgentSummary",
    "Durability",
    "Event",
    "EventStore",
    "agent_summary",
    "every_turn",
    "rebuild_conversation",
]
