"""What the rate-limit governor is doing for a run's models, as typed data: `governor_view` reads the
machine's governor file (`hilbert.models.governor.store.read_file`, read-only) and keeps the buckets
of the models the run uses and their notices since it started. `hilbert status` and `hilbert top`
render it (`hilbert.ui.top_view.governor_lines`); `web` may too.

Why a read of the governor's file and not of the run's log: the governor is shared by every run on
the machine that uses the same provider key (docs/design/governor.md) — a pause another run's 429
caused holds this run's workers too, and no run's log is the place for it. The file holds the state
now (the window, the pause, the breaker, the limits learned) and the last notices; a finished run's
view shows the machine's governor as it is now, which is said so where it is shown.

What must not live here: rendering, and writing to the governor's file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hilbert.errors import HilbertError
from hilbert.fleet.state import FleetState
from hilbert.models.governor import governor_path
from hilbert.models.governor.pacing import Level
from hilbert.models.governor.store import Notice, read_file
from hilbert.models.names import parse_model_name
from hilbert.settings import Settings

NOTICES = 5  # the newest notices a view keeps
BUCKET_NAMES = {"rpm": "requests", "itpm": "input tokens", "otpm": "output tokens", "tpm": "tokens"}


@dataclass(frozen=True)
class Limit:
    """One per-minute limit the governor paces by: from the settings, or learned from the headers."""

    name: str  # rpm | itpm | otpm | tpm
    per_minute: int
    learned: bool
    left: int  # what its bucket holds now (as last saved)


@dataclass(frozen=True)
class BucketView:
    """One provider key and model, as the governor saved it."""

    key: str  # `fingerprint/provider:model` (a hash of the base URL and the key, never the key)
    model: str  # provider:model
    window: int  # calls it lets run at once now (AIMD)
    in_flight: int
    paused_s: float  # a fleet-wide pause left (a Retry-After), 0: none
    pause_why: str
    breaker_s: float | None  # None: closed; else seconds until its probe may go (0: probing now)
    limits: tuple[Limit, ...]
    last_used: float  # unix seconds


@dataclass(frozen=True)
class GovernorView:
    path: Path
    buckets: tuple[BucketView, ...]
    notices: tuple[Notice, ...]  # the newest `NOTICES` on these buckets since the run started, oldest first


def run_models(state: FleetState) -> set[str]:
    """The models (`provider:model`) the run names or its agents used."""
    names = [state.settings.get(key) for key in ("model", "lead_model", "judge_model")]
    names += [view.model for view in state.agents.values()]
    labels = set()
    for name in names:
        if isinstance(name, str) and name:
            try:
                labels.add(parse_model_name(name).label)
            except HilbertError:
                continue
    return labels


def governor_view(path: Path, models: Iterable[str], now: float, since: float = 0.0) -> GovernorView:
    """The governor's buckets of `models` in the file at `path` used since `since` (a bucket of the same
    model under another key, idle since before the run, never paced it), and their notices since."""
    wanted = set(models)
    buckets, notices = read_file(path, lambda key: key.partition("/")[2] in wanted, since, NOTICES)
    views = []
    for key, state in sorted(buckets.items()):
        if state.last_used < since:
            continue
        model = key.partition("/")[2]
        breaker = None if state.breaker_until is None else max(0.0, state.breaker_until - now)
        limits = tuple(
            Limit(name, round(level.limit), level.learned, _left(level, now))
            for name, level in sorted(state.levels.items())
        )
        views.append(
            BucketView(
                key,
                model,
                math.floor(state.limit),
                len(state.leases),
                max(0.0, state.paused_until - now),
                state.pause_why if state.paused_until > now else "",
                breaker,
                limits,
                state.last_used,
            )
        )
    return GovernorView(path, tuple(views), tuple(notices))


def for_run(state: FleetState, settings: Settings, now: float) -> GovernorView:
    """The governor's view of run `state`: its models' buckets in the file the run's settings name (as
    recorded, else `settings`'), and their notices since its first agent started; none for a run that
    ran with the governor off (another run's bucket of its model never paced it)."""
    recorded = state.settings.get("governor.path")
    path = Path(recorded) if recorded else governor_path(settings.governor, settings.home)
    if state.settings.get("governor.enabled") is False:
        return GovernorView(path, (), ())
    since = min((view.started_at for view in state.agents.values()), default=0.0)
    return governor_view(path, run_models(state), now, since)


def _left(level: Level, now: float) -> int:
    """A bucket's level refilled to `now` (its saved level is as of its last update)."""
    refilled = level.level + max(0.0, now - level.updated) * level.limit / 60
    return max(0, math.floor(min(level.limit, refilled)))
