"""The retry arithmetic: backoff bounds, Retry-After parsing and capping, limits on tries and time.
(Retries against a real server are in test_model_faults.py.)"""

from __future__ import annotations

import asyncio
import email.utils
import random

import pytest

from hilbert.errors import HilbertError, ModelError, RefusedError
from hilbert.models.failures import retry_after_seconds
from hilbert.models.retry import Failure, Retrier, RetryPolicy


def test_backoff_doubles_is_jittered_and_capped() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0, jitter=0.5)
    rng = random.Random(7)
    for failed, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (10, 5.0)]:
        delays = [policy.delay_s(failed, None, rng) for _ in range(200)]
        assert all(ceiling * 0.5 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling * 0.3  # really jittered


def test_retry_after_is_honoured_spread_a_little_and_capped() -> None:
    policy = RetryPolicy(max_retry_after_s=10.0)
    rng = random.Random(0)
    delays = [policy.delay_s(1, 3.0, rng) for _ in range(200)]
    assert all(3.0 <= d <= 3.0 * 1.1 for d in delays)  # never sooner than the server asked
    assert max(delays) - min(delays) > 0.2  # a fleet told the same wait does not return at once
    assert policy.delay_s(1, 3600.0, rng) == 10.0


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "0.25"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=1_000_000.0) == pytest.approx(30.0)
    assert retry_after_seconds({"retry-after": email.utils.formatdate(10.0, usegmt=True)}, now=99.0) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def _retrier(policy: RetryPolicy, waits: list[float]) -> Retrier:
    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    return Retrier(policy, sleep=sleep, rng=random.Random(1))


def _flaky(failures: int) -> tuple[list[int], object]:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise ConnectionResetError("reset")
        return "ok"

    return calls, attempt


def _transient(exc: Exception) -> Failure | None:
    if isinstance(exc, ConnectionResetError):
        return Failure(
            retryable=True, summary="connection reset", error=ModelError("m: reset"), retry_after_s=0.5
        )
    return None


def test_retries_until_success_and_counts_tries() -> None:
    waits: list[float] = []
    calls, attempt = _flaky(2)
    result, tries = asyncio.run(_retrier(RetryPolicy(), waits).run(attempt, _transient, model="m"))  # type: ignore[arg-type]
    assert (result, tries, len(calls)) == ("ok", 3, 3)
    assert len(waits) == 2 and all(0.5 <= w <= 0.55 for w in waits)


def test_exhausted_tries_say_how_many_and_what_happened_last() -> None:
    waits: list[float] = []
    calls, attempt = _flaky(10)
    with pytest.raises(ModelError) as caught:
        asyncio.run(_retrier(RetryPolicy(max_attempts=3), waits).run(attempt, _transient, model="m"))  # type: ignore[arg-type]
    assert len(calls) == 3
    assert "gave up after 3 tries" in caught.value.message
    assert "connection reset" in caught.value.message
    assert caught.value.hint


def test_the_time_budget_stops_retries_before_a_wait_would_pass_it() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    calls, attempt = _flaky(10)
    retrier = Retrier(RetryPolicy(max_attempts=100, max_total_s=1.2), sleep=sleep, clock=lambda: now[0])
    with pytest.raises(ModelError) as caught:
        asyncio.run(retrier.run(attempt, _transient, model="m"))  # type: ignore[arg-type]
    # waits of 0.5 s: tries at t=0, 0.5, 1.0; a third wait would end at 1.5 > 1.2
    assert len(calls) == 3
    assert "gave up after 3 tries (time limit reached)" in caught.value.message


def test_final_errors_are_not_retried_and_unknown_exceptions_propagate() -> None:
    waits: list[float] = []

    async def refused() -> str:
        raise PermissionError("no")

    def final(exc: Exception) -> Failure | None:
        if isinstance(exc, PermissionError):
            return Failure(retryable=False, summary="403", error=RefusedError("m: refused", hint="check KEY"))
        return None

    with pytest.raises(RefusedError):
        asyncio.run(_retrier(RetryPolicy(), waits).run(refused, final, model="m"))

    async def bug() -> str:
        raise KeyError("ours")

    with pytest.raises(KeyError):
        asyncio.run(_retrier(RetryPolicy(), waits).run(bug, final, model="m"))
    assert waits == []
    assert not issubclass(KeyError, HilbertError)
