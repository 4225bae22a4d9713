"""A fleet's new attempts admitted by a self-hosted engine's KV cache (`[governor] kv_cache_max`): before
an attempt starts, its worker waits while the engine reports its cache at or above the limit
(`hilbert.models.governor.kvcache`). The wait is in the log: `admission_waiting` when it begins (the
reading that made it wait), `admission_granted` when it ends; an attempt under way never waits here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hilbert.errors import UserError
from hilbert.fleet.events import FleetEvent, kind
from hilbert.models.governor.kvcache import KvCacheGate, Reading, metrics_url
from hilbert.models.types import Model
from hilbert.settings import GovernorSettings


@kind("admission_waiting")
class AdmissionWaiting(FleetEvent):
    """`worker` waits to start `task`: the engine's KV cache read `usage` (gauge `gauge`) at `url`, at or
    above `limit`."""

    task: str = ""
    worker: str = ""
    usage: float = 0.0
    limit: float = 0.0
    gauge: str = ""
    url: str = ""


@kind("admission_granted")
class AdmissionGranted(FleetEvent):
    """`worker` starts `task` after `waited_s`: the cache read `usage` (None: it could not be read)."""

    task: str = ""
    worker: str = ""
    usage: float | None = None
    waited_s: float = 0.0


def kv_cache_gate(settings: GovernorSettings, worker: Model) -> KvCacheGate | None:
    """The gate the settings ask for (None when `kv_cache_max` is 0): on `kv_cache_metrics`, else the
    `/metrics` beside the workers' model's base URL."""
    if not settings.kv_cache_max:
        return None
    endpoint = getattr(worker, "endpoint", None)
    url = settings.kv_cache_metrics or (metrics_url(endpoint.base_url) if endpoint is not None else "")
    if not url:
        raise UserError(
            f"governor.kv_cache_max is set, but the workers' model {worker.name} has no base URL to read"
            " the engine's /metrics from",
            hint="set governor.kv_cache_metrics = 'http://HOST:PORT/metrics' in hilbert.toml",
        )
    return KvCacheGate(url, settings.kv_cache_max, poll_s=settings.kv_cache_poll_s)


async def admit(gate: KvCacheGate, record: Callable[[FleetEvent], object], task: str, worker: str) -> None:
    """Return when `worker` may start `task`; a wait is logged when it begins and when it ends."""
    began = time.monotonic()
    waited: list[Reading] = []

    def waiting(reading: Reading) -> None:
        waited.append(reading)
        usage = reading.usage or 0.0
        record(
            AdmissionWaiting(
                task=task, worker=worker, usage=usage, limit=gate.limit, gauge=reading.gauge, url=gate.url
            )
        )

    reading = await gate.admit(waiting)
    if waited:
        waited_s = round(time.monotonic() - began, 3)
        record(AdmissionGranted(task=task, worker=worker, usage=reading.usage, waited_s=waited_s))


__all__ = ["AdmissionGranted", "AdmissionWaiting", "admit", "kv_cache_gate"]
