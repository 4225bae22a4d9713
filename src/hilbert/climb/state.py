"""`ClimbState`: the fold of a climb's events — the best, the noise, every try and what became of it,
the money spent. The log is the only truth: `climb --status`, `status`, `results.tsv` and a resume
all read this fold, and nothing of a climb lives only in the driver's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hilbert.climb import events as ce
from hilbert.fleet.events import MergeLanding, decode
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.store.folding import catch_up
from hilbert.store.kinds import MODEL_CALL


@dataclass
class TryView:
    """One try as the log tells it; `outcome` is None while it is in flight."""

    no: int
    explorer: str
    base: str
    started_at: float
    commit: str = ""
    idea: str = ""
    findings: tuple[str, ...] = ()
    shingles: frozenset[int] = frozenset()
    tree: str = ""
    passed_gate: bool = False
    values: tuple[float, ...] = ()
    median: float | None = None
    spread: float = 0.0
    holdout: float | None = None  # the sealed holdout's median, on a try better on the metric
    overfit: bool = False  # ... which the holdout did not follow: reverted
    landing: str = ""  # the commit the merge queue was about to move the best branch to
    outcome: str | None = None  # "kept" or "reverted"
    stage: str = ""  # a reverted try's stage (gate, duplicate, ...)
    reason: str = ""


@dataclass
class ClimbState:
    run: str
    started: ce.ClimbStarted | None = None
    started_at: float = 0.0
    best: str = ""  # the best commit
    best_median: float | None = None
    baseline_median: float | None = None
    noise: float = 0.0
    noise_at_try: int = 0  # the try count when the noise was last measured
    tries: dict[int, TryView] = field(default_factory=dict)
    finished: ce.ClimbFinished | None = None
    spent_usd: float = 0.0
    base_error: str = ""
    holdout_base: float | None = None
    holdout_best: float | None = None
    holdout_noise: float = 0.0
    holdout_error: str = ""
    last_id: int = 0

    @property
    def done(self) -> list[TryView]:
        return [t for t in self.tries.values() if t.outcome is not None]

    @property
    def in_flight(self) -> list[TryView]:
        return [t for t in self.tries.values() if t.outcome is None]

    @property
    def overfit(self) -> list[TryView]:
        """Tries better on the metric that the holdout did not follow (reverted as `overfit`)."""
        return [t for t in self.tries.values() if t.overfit]

    @property
    def kept(self) -> list[TryView]:
        return [t for t in self.tries.values() if t.outcome == "kept"]

    def next_try(self) -> int:
        return max(self.tries, default=0) + 1


def apply(state: ClimbState, event: Event) -> ClimbState:
    """Fold one event of the run into `state` (in place) and return it."""
    state.last_id = max(state.last_id, event.id)
    if event.kind == MODEL_CALL:
        state.spent_usd += float(event.data.get("cost_usd") or 0.0)
        return state
    record = decode(event)
    if isinstance(record, ce.ClimbStarted):
        state.started, state.started_at, state.best = record, event.time, record.base
    elif isinstance(record, ce.BaselineMeasured):
        if record.error:
            state.base_error = record.error
        else:
            state.best, state.best_median, state.noise = record.commit, record.median, record.noise
            state.noise_at_try = len(state.done)
            if state.baseline_median is None:
                state.baseline_median = record.median
    elif isinstance(record, ce.TryStarted):
        state.tries[record.try_no] = TryView(record.try_no, record.explorer, record.base, event.time)
    elif isinstance(record, ce.TryGated) and record.try_no in state.tries:
        view = state.tries[record.try_no]
        view.commit, view.idea, view.tree = record.commit, record.idea, record.tree
        view.findings, view.shingles = tuple(record.findings), frozenset(record.shingles)
        view.passed_gate = record.passed
    elif isinstance(record, ce.TryMeasured) and record.try_no in state.tries:
        view = state.tries[record.try_no]
        view.values, view.spread = tuple(record.values), record.spread
        view.median = None if record.error else record.median
    elif isinstance(record, ce.TryKept) and record.try_no in state.tries:
        view = state.tries[record.try_no]
        view.outcome = "kept"
        state.best, state.best_median = record.commit, record.median
        if view.holdout is not None:
            state.holdout_best = view.holdout
    elif isinstance(record, ce.TryReverted) and record.try_no in state.tries:
        view = state.tries[record.try_no]
        view.outcome, view.stage, view.reason = "reverted", record.stage, record.reason
    elif isinstance(record, ce.HoldoutMeasured):
        _holdout(state, record)
    elif isinstance(record, MergeLanding):  # the queue's intent, logged before the branch moves
        for task in record.tasks:
            number = task.removeprefix("try-")
            if number.isdigit() and int(number) in state.tries:
                state.tries[int(number)].landing = record.commit
    elif isinstance(record, ce.ClimbFinished):
        state.finished = record
    return state


def _holdout(state: ClimbState, record: ce.HoldoutMeasured) -> None:
    if record.try_no == 0:  # the base: a holdout that fails there is not used (and says so)
        if record.error:
            state.holdout_error = record.error
        else:
            state.holdout_base = state.holdout_best = record.median
            state.holdout_noise = record.noise
    elif record.try_no in state.tries:  # before the try is kept or reverted (`overfit`)
        view = state.tries[record.try_no]
        view.holdout = None if record.error else record.median
        view.overfit = record.overfit


class ClimbFold:
    """A climb's fold that catches up incrementally (only the events since the last call)."""

    def __init__(self, store: EventStore, run: str) -> None:
        self.store, self.state = store, ClimbState(run)

    def catch_up(self) -> ClimbState:
        return catch_up(self.store, self.state, apply)


def is_climb(store: EventStore, run: str) -> bool:
    """Whether `run` is a climb (its log holds `climb_started`)."""
    return bool(store.events(run=run, kinds=[ce.CLIMB_STARTED], limit=1))


__all__ = ["ClimbFold", "ClimbState", "TryView", "apply", "is_climb"]
