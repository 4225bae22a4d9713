"""The governor's driver: `Governor.admit` around every attempt of every model call.

    async with governor.admit(key, estimate) as slot:   # waits: breaker, pause, concurrency, buckets
        turn = await attempt()
        slot.report(Outcome("ok", input_tokens=..., output_tokens=..., readings=...))

Waiting: in one process, the callers of a bucket queue behind one lock (first come, first served),
so only the head of the queue asks the shared file; it sleeps for what the core said (a pause, a
bucket's refill) spread by the jitter, or, when the window is full, until a call of this process
ends or `POLL_S` passes (a call of another process may have ended). Nothing here sleeps a fixed time.
A slot left without a report (its caller was cancelled, or raised something that is not the wire's)
is released as `refused`: it teaches nothing.

The governor fails open: when its file cannot be written (a full disk, a broken file) the call goes
ahead unpaced and the log says so once — pacing saves money and 429s, it guards nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import socket
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from hilbert.models.governor.pacing import (
    Admit,
    BreakerChange,
    BucketState,
    Knobs,
    Outcome,
    Wait,
    decide,
    next_wake,
    reclaim,
    report,
)
from hilbert.models.governor.store import GovernorStore

logger = logging.getLogger("hilbert.governor")


def bucket_key(api_key: str, base_url: str | None, model: str) -> str:
    """The bucket of a provider key and model: a hash of the key (and where it is sent), never the key."""
    digest = hashlib.sha256(f"{base_url or ''}\0{api_key}".encode()).hexdigest()[:16]
    return f"{digest}/{model}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class _Queue:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    released: asyncio.Event = field(default_factory=asyncio.Event)


class Slot:
    """One admitted attempt. `report` once with what happened; the lease is freed then."""

    def __init__(
        self, governor: Governor, key: str, lease_id: str, probe: bool, *, reported: bool = False
    ) -> None:
        self.governor, self.key, self.lease_id, self.probe = governor, key, lease_id, probe
        self.reported = reported  # True: nothing to report (an unpaced call)

    def report(self, outcome: Outcome) -> None:
        if not self.reported:
            self.reported = True
            self.governor._report(self.key, self.lease_id, outcome)


class Governor:
    """Pacing per provider key and model, shared through `store` with every process using its file."""

    def __init__(
        self,
        store: GovernorStore,
        knobs: Knobs | None = None,
        *,
        jitter: float = 0.2,
        seed: int | None = None,
    ) -> None:
        self.store = store
        self.knobs = knobs or Knobs()
        self.jitter = jitter
        self.rng = random.Random(seed)
        self.pid, self.host = os.getpid(), socket.gethostname()
        self._queues: dict[tuple[int, str], _Queue] = {}
        self._failed_open = False

    def _queue(self, key: str) -> _Queue:
        loop_id = id(asyncio.get_running_loop())
        queue = self._queues.get((loop_id, key))
        if queue is None:
            queue = self._queues[(loop_id, key)] = _Queue()
        return queue

    @contextlib.asynccontextmanager
    async def admit(self, key: str, estimate: int) -> AsyncIterator[Slot]:
        """Wait until a call of about `estimate` input tokens may start on bucket `key`; its slot."""
        queue = self._queue(key)
        try:
            async with queue.lock:
                admitted = await self._wait_turn(key, estimate, queue)
        except sqlite3.Error as error:
            self._unpaced(error)
            yield Slot(self, key, "", probe=False, reported=True)
            return
        slot = Slot(self, key, admitted.lease_id, admitted.probe)
        try:
            yield slot
        finally:
            if not slot.reported:
                slot.report(Outcome("refused"))

    async def _wait_turn(self, key: str, estimate: int, queue: _Queue) -> Admit:
        lease_id = uuid.uuid4().hex
        waited: Wait | None = None
        while True:
            queue.released.clear()

            def attempt(state: BucketState) -> Admit | Wait:
                now = time.time()
                reclaim(state, now, _alive, self.host)
                return decide(state, self.knobs, now, estimate, lease_id, self.pid, self.host)

            decision = self.store.update(key, self.knobs, attempt)
            if isinstance(decision, Admit):
                return decision
            if decision.breaker and (waited is None or not waited.breaker):
                logger.warning("governor_paused %s: %s", key, decision.why)
            waited = decision
            wake = next_wake(decision, self.jitter, self.rng)
            if decision.seconds is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(queue.released.wait(), wake)
            else:
                await asyncio.sleep(wake)

    def _unpaced(self, error: sqlite3.Error) -> None:
        if not self._failed_open:
            self._failed_open = True
            logger.warning("governor: %s unusable (%s): model calls go unpaced", self.store.path, error)

    def _report(self, key: str, lease_id: str, outcome: Outcome) -> None:
        try:
            self._fold(key, lease_id, outcome)
        except sqlite3.Error as error:
            self._unpaced(error)
        for (_, queued_key), queue in self._queues.items():
            if queued_key == key:
                queue.released.set()

    def _fold(self, key: str, lease_id: str, outcome: Outcome) -> None:
        before: list[float] = []

        def fold(state: BucketState) -> BreakerChange | None:
            before.append(state.paused_until)
            return report(state, self.knobs, time.time(), lease_id, outcome)

        note = self.store.update(key, self.knobs, fold)
        if note is not None:
            logger.warning("%s %s: %s", note.kind, key, note.why)
            self.store.notice(key, note.kind, note.why)
        if outcome.kind in ("throttled", "overloaded") and outcome.retry_after_s and before[0] < time.time():
            why = f"{outcome.kind}: every caller waits {outcome.retry_after_s:g} s (Retry-After)"
            logger.info("governor_throttled %s: %s", key, why)
            self.store.notice(key, "governor_throttled", why)

    def close(self) -> None:
        self.store.close()
