"""The climb's events as typed records, in the fleet's registry (`hilbert.fleet.events.EVENTS`), so
`decode` reads them like any fleet kind; the fleet's fold has no handler for them and passes them by.

Every record is written by the harness (agent "harness"); `try_no` numbers a run's tries from 1.
A try's life: `try_started` → `try_gated` → (`try_measured` (→ `holdout_measured`)) → `try_kept` |
`try_reverted`; a try
with `try_started` and no ending was in flight when the run died, and a resume starts it again.
"""

from __future__ import annotations

from dataclasses import field

from hilbert.fleet.events import FleetEvent, kind

CLIMB_STARTED = "climb_started"


@kind(CLIMB_STARTED)
class ClimbStarted(FleetEvent):
    """A climb's settings, as a resume reads them back."""

    repo: str = ""
    integration: str = ""  # the run's bare repository; `branch` lives there
    branch: str = ""  # hilbert/climb/<run>/best
    base: str = ""
    metric: str = ""
    goal: str = "min"
    test_command: str = ""
    explorers: int = 1
    tries: int = 0  # 0: no limit but the budgets
    repeat: int = 5
    renoise_every: int = 10
    max_cost_usd: float = 0.0  # 0: none
    max_time_s: float = 0.0  # 0: none
    guards: list[str] = field(default_factory=list)
    model: str = ""
    mark: str = ""
    holdout: str = ""  # the sealed holdout's command ("" none); its folders are hidden from explorers
    stop_on_overfit: bool = False
    metric_kind: str = "number"  # number: the printed number is the score; time: the harness's CPU timing
    check: str = ""  # the command whose output is the answer ("" the metric's own output)


@kind("baseline_measured")
class BaselineMeasured(FleetEvent):
    """The best's measurements, at the start and every `renoise_every` tries: the noise comes from here."""

    commit: str = ""
    values: list[float] = field(default_factory=list)
    median: float = 0.0
    noise: float = 0.0
    error: str = ""  # a failed measurement of the base: the climb cannot start


@kind("try_started")
class TryStarted(FleetEvent):
    try_no: int = 0
    explorer: str = ""
    base: str = ""


@kind("try_gated")
class TryGated(FleetEvent):
    """The gate's outcome on a try's commit (`findings`: integrity's and the guards', one line each)."""

    try_no: int = 0
    commit: str = ""
    idea: str = ""
    passed: bool = False
    reasons: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    shingles: list[int] = field(default_factory=list)  # its diff's fingerprint, for near-duplicates
    tree: str = ""


@kind("try_measured")
class TryMeasured(FleetEvent):
    try_no: int = 0
    commit: str = ""  # the try's commit, or its merge onto a best that moved while it ran
    values: list[float] = field(default_factory=list)
    median: float = 0.0
    spread: float = 0.0
    error: str = ""  # a failed measurement: the try is reverted with it, never scored
    best_values: list[float] = field(default_factory=list)  # the best's readings, interleaved with these
    runs: list[int] = field(default_factory=list)  # per reading, the runs the stopwatch looped (time)


@kind("try_kept")
class TryKept(FleetEvent):
    """The best moved to `commit`: the merge queue's merge of the try onto the best (its tree is the
    one measured), landed on `branch` in the run's repository."""

    try_no: int = 0
    commit: str = ""
    median: float = 0.0
    previous: float = 0.0


@kind("try_reverted")
class TryReverted(FleetEvent):
    """Why a try was not kept: `stage` is no_change, gate, duplicate, measure, answer (it answered
    otherwise than the best on the harness's input), stale (it does not merge onto a best that moved
    while it ran), no_gain, overfit (better on the metric, not on the sealed holdout), merge (the
    merge queue's tests failed on it merged onto the best) or interrupted."""

    try_no: int = 0
    stage: str = ""
    reason: str = ""


@kind("holdout_measured")
class HoldoutMeasured(FleetEvent):
    """The sealed holdout on the base (`try_no` 0) or on a try the metric found better, before it is
    kept. `overfit`: the holdout did not follow (not better than the best's, measured beside it, beyond
    2 x its noise, or it failed or answered otherwise on it): the try is reverted (`overfit`)."""

    try_no: int = 0
    commit: str = ""
    values: list[float] = field(default_factory=list)
    median: float = 0.0
    noise: float = 0.0
    error: str = ""
    overfit: bool = False


@kind("climb_finished")
class ClimbFinished(FleetEvent):
    reason: str = ""
    best: str = ""
    median: float = 0.0


__all__ = [
    "CLIMB_STARTED",
    "BaselineMeasured",
    "ClimbFinished",
    "ClimbStarted",
    "HoldoutMeasured",
    "TryGated",
    "TryKept",
    "TryMeasured",
    "TryReverted",
    "TryStarted",
]
