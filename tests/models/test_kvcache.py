"""Admission by a self-hosted engine's KV cache (`[governor] kv_cache_max`): the gauges of vLLM (V1 and
V0) and SGLang read from recorded `/metrics` pages (cited in the fixtures), and a gate that waits while
the cache is full and admits once it is not, or when the engine cannot be read. The fleet's side:
`tests/fleet/test_kv_admission.py`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hilbert.errors import ConfigError
from hilbert.models.governor.kvcache import KvCacheGate, Reading, kv_usage, metrics_url
from hilbert.settings import Settings

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_engines_gauges_are_read_from_their_metrics_pages() -> None:
    assert kv_usage((FIXTURES / "metrics_vllm_v1.txt").read_text()) == Reading(
        0.93, "vllm:kv_cache_usage_perc"
    )
    assert kv_usage((FIXTURES / "metrics_vllm_v0.txt").read_text()) == Reading(
        0.41, "vllm:gpu_cache_usage_perc"
    )
    assert kv_usage((FIXTURES / "metrics_sglang.txt").read_text()) == Reading(0.28, "sglang:token_usage")
    assert kv_usage("# TYPE up gauge\nup 1\n").usage is None  # a page without a known gauge
    assert kv_usage("{{{ not prometheus").usage is None
    assert metrics_url("http://gpu-box:8000/v1") == "http://gpu-box:8000/metrics"


def test_the_gate_waits_while_the_cache_is_full_and_admits_when_it_cannot_read_it() -> None:
    pages = iter(
        [
            "vllm:kv_cache_usage_perc 0.97\n",
            "vllm:kv_cache_usage_perc 0.95\n",
            "vllm:kv_cache_usage_perc 0.5\n",
        ]
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    gate = KvCacheGate("http://engine/metrics", 0.9, poll_s=0.25, read=lambda url: next(pages), sleep=sleep)
    heard: list[Reading] = []
    admitted = asyncio.run(gate.admit(heard.append))
    assert admitted.usage == 0.5 and slept == [0.25, 0.25]
    assert [r.usage for r in heard] == [0.97]  # told once per wait

    def down(url: str) -> str:
        raise OSError("connection refused")

    unread = asyncio.run(KvCacheGate("http://engine/metrics", 0.9, read=down).admit())
    assert unread.usage is None and "connection refused" in unread.error  # not gated, rather than stopped


def test_kv_cache_max_is_a_share() -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.of({"governor.kv_cache_max": 1.5})
    assert "at most 1" in refused.value.hint and "\n" not in str(refused.value)
