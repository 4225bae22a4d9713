"""Retrying one model call: jittered exponential backoff, `Retry-After`, bounded tries and time.

The SDK clients are built with `max_retries=0`, so this is the only retry layer. `Retrier.run`
runs an attempt, asks `failures.classify` what a failure means, waits (the server's `Retry-After`,
capped, or `base_delay_s * 2**n` with jitter, capped) and tries again until it succeeds, the error is
final, `max_attempts` are used, or waiting would pass `max_total_s`. It then raises the hilbert error
of the last failure; an exhausted retry says how many tries were made and what happened last.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from hilbert.errors import HilbertError, ModelError

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """What one failed attempt means (made by `failures.classify`). `error` is raised if no retry follows."""

    retryable: bool
    summary: str
    error: HilbertError
    retry_after_s: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. `jitter` is the fraction of a backoff delay that is randomised away."""

    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    max_retry_after_s: float = 60.0
    max_total_s: float = 900.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")

    def delay_s(self, failed_attempts: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Seconds to wait after `failed_attempts` failures (1 for the first). A server's Retry-After
        is honoured (never retried sooner) and spread by up to +20 % × `jitter` (10 % by default) so
        that a fleet told to wait the same time does not come back all at once."""
        if retry_after_s is not None:
            return min(retry_after_s * (1.0 + 0.2 * self.jitter * rng.random()), self.max_retry_after_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (failed_attempts - 1))
        return ceiling * (1.0 - self.jitter * rng.random())


@dataclass(frozen=True)
class Retrier:
    """A `RetryPolicy` with its clock, sleep and random source (replaceable in tests)."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        classify: Callable[[Exception], Failure | None],
        *,
        model: str,
    ) -> tuple[T, int]:
        """Run `attempt` until it succeeds; return its result and the number of tries it took.
        An exception `classify` does not know (returns None for) propagates unchanged."""
        started = self.clock()
        tries = 0
        while True:
            tries += 1
            try:
                return await attempt(), tries
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                wait = self._wait_or_raise(failure, tries, started, exc, model)
            await self.sleep(wait)

    def _wait_or_raise(
        self, failure: Failure, tries: int, started: float, exc: BaseException, model: str
    ) -> float:
        if not failure.retryable:
            raise failure.error from exc
        if tries >= self.policy.max_attempts:
            raise _exhausted(model, tries, failure) from exc
        wait = self.policy.delay_s(tries, failure.retry_after_s, self.rng)
        if self.clock() - started + wait > self.policy.max_total_s:
            raise _exhausted(model, tries, failure, out_of_time=True) from exc
        return wait


def _exhausted(model: str, tries: int, failure: Failure, *, out_of_time: bool = False) -> ModelError:
    why = "time limit reached" if out_of_time else "no tries left"
    plural = "try" if tries == 1 else "tries"
    return ModelError(
        f"{model}: gave up after {tries} {plural} ({why}); last: {failure.summary}",
        hint="the provider is failing or overloaded: try again later, or raise the retry limits",
    )
