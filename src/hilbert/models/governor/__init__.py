"""The rate-limit governor: every model call of every hilbert run on the machine, per provider key
and model, paced through one shared SQLite file (docs/design/governor.md).

Layout: `pacing` (the pure core: AIMD concurrency, the fleet-wide pause, token buckets, the circuit
breaker) · `headers` (the providers' rate-limit headers) · `outcome` (an attempt's result as the core
reads it) · `store` (the shared file) · `governor` (the driver the adapters call) · `fallback` (chains
per role, checked at start). The adapters (`hilbert.models.wire`) call `Governor.admit` around each
attempt; the `Retrier` stays the per-call layer above it (how often and how long one call tries).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hilbert.models.governor.fallback import FallbackModel, check_fallbacks
from hilbert.models.governor.governor import Governor, Slot, bucket_key, logger
from hilbert.models.governor.pacing import BucketState, Knobs, Outcome
from hilbert.models.governor.store import GovernorStore, Notice
from hilbert.settings import GovernorSettings

__all__ = [
    "BucketState",
    "FallbackModel",
    "Governor",
    "GovernorStore",
    "Knobs",
    "Notice",
    "Outcome",
    "Slot",
    "bucket_key",
    "check_fallbacks",
    "governor_from",
    "governor_path",
]


def governor_path(settings: GovernorSettings, home: Path) -> Path:
    """The governor's file: `[governor] path`, else `home/governor.db`."""
    return settings.path or home / "governor.db"


def governor_from(settings: GovernorSettings, home: Path, *, seed: int | None = None) -> Governor | None:
    """The governor the settings describe (its file: `path`, else `home/governor.db`); None when off,
    or when the file cannot be opened (logged: the calls go unpaced, as when it breaks later)."""
    if not settings.enabled:
        return None
    path = governor_path(settings, home)
    try:
        store = GovernorStore(path)
    except (OSError, sqlite3.Error) as error:
        logger.warning("governor: %s unusable (%s): model calls go unpaced", path, error)
        return None
    knobs = Knobs(
        max_concurrency=settings.max_concurrency,
        initial_concurrency=settings.initial_concurrency,
        limits={name: getattr(settings, name) for name in ("rpm", "itpm", "otpm") if getattr(settings, name)},
        breaker_failures=settings.breaker_failures,
        breaker_cooldown_s=settings.breaker_cooldown_s,
        lease_s=settings.lease_s,
    )
    return Governor(store, knobs, jitter=settings.jitter, seed=seed)
