"""Catching a fold up with a run's log: the events committed since the fold's last one, by any process.

A fold's state names its `run` and the id of the last event it applied (`last_id`); `apply(state,
event)` applies one event (and moves `last_id`). The fleet's `Fold` and the climb's `ClimbFold` are
both this loop over their own `apply`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from hilbert.store.event_store import Event, EventStore

CHUNK = 5000  # events read per query


class FoldState(Protocol):
    run: str
    last_id: int


S = TypeVar("S", bound=FoldState)


def catch_up(store: EventStore, state: S, apply: Callable[[S, Event], object]) -> S:
    """`state` with every event of its run after its `last_id` applied, read `CHUNK` at a time."""
    while True:
        batch = store.events(run=state.run, after_id=state.last_id, limit=CHUNK)
        for event in batch:
            apply(state, event)
        if len(batch) < CHUNK:
            return state


__all__ = ["CHUNK", "FoldState", "catch_up"]
