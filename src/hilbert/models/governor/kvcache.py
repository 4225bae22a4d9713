"""Admission by a self-hosted engine's KV cache: a new attempt starts only while the engine's KV-cache
usage, read from its Prometheus `/metrics`, is below `[governor] kv_cache_max` (docs/design/governor.md).

An engine whose cache is full preempts running requests (their work is recomputed) or queues new ones;
admitting fewer attempts while it is full keeps the running ones whole. Only new attempts wait: an
attempt under way keeps its calls going (its prefix is in the cache). No claim is made about
preemption itself: nothing here was measured on a real engine.

The gauges read (each a share, 0 to 1; the fullest label set counts — several engines or ranks):

    vllm:kv_cache_usage_perc   vLLM, V1 engine: "Fraction of used KV cache blocks (0-1)"
                               https://docs.vllm.ai/en/v0.12.0/design/metrics/
    vllm:gpu_cache_usage_perc  vLLM, V0 engine: "GPU KV-cache usage. 1 means 100 percent usage."
                               https://docs.vllm.ai/en/v0.5.3/serving/metrics.html
    sglang:token_usage         SGLang (--enable-metrics): the share of its KV pool's tokens in use
                               https://docs.sglang.io/docs/references/production_metrics

Recorded examples: `tests/models/fixtures/metrics_*.txt`. A `/metrics` that does not answer, or has none
of these gauges, admits (said once in the log): the engine is not gated rather than the fleet stopped.
"""

from __future__ import annotations

import asyncio
import logging
import math
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

logger = logging.getLogger(__name__)

GAUGES = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
FETCH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Reading:
    """One look at the engine: its usage (None: no answer, or no gauge known) and from which gauge."""

    usage: float | None
    gauge: str = ""
    error: str = ""


def kv_usage(text: str) -> Reading:
    """The KV-cache usage a Prometheus exposition reports: the largest value of the first known gauge
    it has (in `GAUGES` order), over its label sets."""
    try:
        families = {family.name: family for family in text_string_to_metric_families(text)}
    except ValueError as error:
        return Reading(None, error=f"not Prometheus text: {error}")
    for name in GAUGES:
        family = families.get(name)
        values = [s.value for s in family.samples if not math.isnan(s.value)] if family else []
        if values:
            return Reading(max(values), name)
    return Reading(None, error=f"none of the gauges {', '.join(GAUGES)}")


def metrics_url(base_url: str) -> str:
    """An OpenAI-compatible server's `/metrics` (vLLM and SGLang serve it beside `/v1`)."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as answer:
        return str(answer.read().decode("utf-8", "replace"))


class KvCacheGate:
    """Waits, before a new attempt, until the engine at `url` reports its KV cache below `limit`."""

    def __init__(
        self,
        url: str,
        limit: float,
        *,
        poll_s: float = 2.0,
        read: Callable[[str], str] = fetch,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.url, self.limit, self.poll_s = url, limit, poll_s
        self._read, self._sleep = read, sleep
        self._unread = False  # said once that the engine could not be read

    async def look(self) -> Reading:
        try:
            text = await asyncio.to_thread(self._read, self.url)
        except (OSError, urllib.error.URLError, ValueError) as error:
            return Reading(None, error=f"{self.url}: {error}")
        return kv_usage(text)

    async def admit(self, waiting: Callable[[Reading], None] = lambda reading: None) -> Reading:
        """Return once the cache is below the limit (or cannot be read); `waiting` hears the reading
        that made it wait, once per wait."""
        told = False
        while True:
            reading = await self.look()
            if reading.usage is None:
                if not self._unread:
                    logger.warning("KV-cache admission off: %s", reading.error)
                    self._unread = True
                return reading
            if reading.usage < self.limit:
                return reading
            if not told:
                waiting(reading)
                told = True
            await self._sleep(self.poll_s)


__all__ = ["GAUGES", "KvCacheGate", "Reading", "kv_usage", "metrics_url"]
