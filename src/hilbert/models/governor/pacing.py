"""The governor's pure core: one bucket's state (a provider key and model) and what to do with it.

No clock, no I/O: every function takes `now` (unix seconds, shared by processes) and returns the
decision or changes the state in place; `store.py` loads and saves the state around each call in one
transaction, `governor.py` drives it. The algorithm:

- **Concurrency (AIMD).** `limit` starts at the settings' `initial_concurrency`. A success counts when
  the window was full (as many calls in flight as `limit` allows) at some moment while the call was
  in flight — a window that never fills says nothing about whether a larger one would do; after
  `ceil(limit)` such successes (one window) `limit` grows by 1, up to `max_concurrency`. Until the
  first decrease each such success adds 1 (the window doubles each round trip: TCP's slow start), so
  a fresh key reaches its rate in a few round trips rather than one slot per round trip. A 429, a 529 or an
  overload error halves it (floor 1), once per window: only a call admitted after the last decrease
  can cut it again, so the twenty calls refused by one burst halve it once, as TCP does.
  A bucket with nothing in flight for `IDLE_RESET_S` starts afresh (TCP's restart after idle): the
  file outlives runs, and one run's halvings are stale evidence for the next.
- **Pause.** A Retry-After sets `paused_until` (the later of the two): every caller of the bucket,
  in every process, waits it out.
- **Token buckets.** Requests, input tokens and output tokens per minute (and `tokens`, input and
  output together, for providers that count them as one), each with a level that refills at
  LIMIT/60 a second up to LIMIT. The limit comes from the settings, else from the headers of the
  last response that carried one. Admission takes 1 request and the call's estimated input tokens
  (the caller's estimate times `token_ratio`, what the provider counted over what was estimated on
  recent calls — a moving average — plus 10 %) and needs 1 output token left. The report gives back
  the reservation and takes the real input and the output, then lowers each level to what the server
  said remains, plus what refilled since the response was read, less what calls admitted since then
  took; it never raises it: the server is the truth, and a request we admitted that it has not seen
  yet must stay counted.
- **Circuit breaker.** `breaker_failures` consecutive failures (5xx, 529, timeouts, broken
  connections: not 429s, which are pacing, nor refusals, which are the request's fault) open it for
  `breaker_cooldown_s`; then one call is let through as a probe: its success closes the breaker, its
  failure opens it again for twice as long (at most ten minutes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

BUCKETS = ("rpm", "itpm", "otpm", "tpm")  # requests, input, output, and input + output tokens
MAX_COOLDOWN_S = 600.0
POLL_S = 0.25  # a waiter with nothing better to go by looks again this often (other processes)
IDLE_RESET_S = 60.0  # a bucket unused this long starts its window afresh (a minute: every window refilled)

OutcomeKind = Literal["ok", "throttled", "overloaded", "failed", "refused"]


@dataclass(frozen=True)
class Knobs:
    """The settings the core needs (from `GovernorSettings`)."""

    max_concurrency: int = 64
    initial_concurrency: int = 4
    limits: dict[str, int] = field(default_factory=dict)  # configured per-minute limits, by bucket
    breaker_failures: int = 5
    breaker_cooldown_s: float = 30.0
    lease_s: float = 900.0


@dataclass(frozen=True)
class Outcome:
    """What one attempt told the governor. `kind`: ok; throttled (429); overloaded (529, 503, an
    overloaded error); failed (another 5xx, a timeout, a broken connection or stream); refused (the
    request's own fault: 4xx — it says nothing about the provider's health). `readings` are the
    rate-limit headers parsed (`headers.readings`), read at `read_at`."""

    kind: OutcomeKind
    retry_after_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int = 0
    readings: dict[str, tuple[int, int]] = field(default_factory=dict)  # bucket -> (limit, remaining)
    read_at: float | None = None


@dataclass
class Lease:
    pid: int
    host: str
    started: float
    expires: float
    estimate: int  # input tokens reserved (the caller's estimate, corrected by `token_ratio`)
    raw_estimate: int = 0  # the caller's own estimate, to learn the ratio
    probe: bool = False


@dataclass
class Level:
    limit: float
    level: float
    updated: float
    learned: bool  # from headers (True) or from the settings

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + max(0.0, now - self.updated) * self.limit / 60)
        self.updated = max(self.updated, now)


@dataclass
class BucketState:
    """Everything the governor knows of one provider key and model; saved as one JSON row."""

    limit: float
    successes: int = 0
    decreased_at: float = 0.0
    full_at: float = 0.0  # the last time the window was full (a success since then may grow it)
    token_ratio: float = 1.0  # input tokens counted by the provider / estimated (moving average)
    slow_start: bool = True  # no decrease yet: grow by one per success, not per window
    paused_until: float = 0.0
    pause_why: str = ""
    failures: int = 0
    breaker_until: float | None = None  # set: open (until then, then a probe)
    cooldown_s: float = 0.0
    last_used: float = 0.0  # the last admission or report (an idle bucket starts its window afresh)
    leases: dict[str, Lease] = field(default_factory=dict)
    levels: dict[str, Level] = field(default_factory=dict)

    @classmethod
    def new(cls, knobs: Knobs, now: float) -> BucketState:
        state = cls(limit=float(min(knobs.initial_concurrency, knobs.max_concurrency)))
        adopt(state, knobs, now)
        return state

    def to_json(self) -> dict[str, Any]:
        # by hand: `dataclasses.asdict` deep-copies, and this runs twice per model call
        data = dict(vars(self))
        data["leases"] = {k: vars(v) for k, v in self.leases.items()}
        data["levels"] = {k: vars(v) for k, v in self.levels.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BucketState:
        leases = {k: Lease(**v) for k, v in data.pop("leases").items()}
        levels = {k: Level(**v) for k, v in data.pop("levels").items()}
        return cls(**data, leases=leases, levels=levels)


@dataclass(frozen=True)
class Admit:
    lease_id: str
    probe: bool


@dataclass(frozen=True)
class Wait:
    seconds: float | None  # None: until a slot frees (poll)
    why: str
    breaker: bool = False  # the circuit breaker holds it (logged once as governor_paused)


@dataclass(frozen=True)
class BreakerChange:
    """The breaker opened (`governor_paused`) or closed (`governor_resumed`), and why."""

    kind: Literal["governor_paused", "governor_resumed"]
    why: str


def adopt(state: BucketState, knobs: Knobs, now: float) -> None:
    """This run's settings over what the file kept from earlier runs, which may have had others: the
    window within `max_concurrency`, each configured limit in force, a limit no longer configured gone
    (the headers may teach it again)."""
    state.limit = min(state.limit, float(knobs.max_concurrency))
    for name, kept in list(state.levels.items()):
        if not kept.learned and not knobs.limits.get(name):
            del state.levels[name]
    for name, limit in knobs.limits.items():
        known = state.levels.get(name)
        if limit and (known is None or known.learned or known.limit != limit):
            if known is not None:
                known.refill(now)
            level = float(limit) if known is None else min(known.level, float(limit))
            state.levels[name] = Level(float(limit), level, now, learned=False)


def reclaim(state: BucketState, now: float, alive: Any, host: str) -> list[str]:
    """Drop the leases whose holder died (a pid on this host that is gone) or that expired; their ids."""
    gone = [
        lease_id
        for lease_id, lease in state.leases.items()
        if lease.expires <= now or (lease.host == host and not alive(lease.pid))
    ]
    for lease_id in gone:
        del state.leases[lease_id]
    return gone


def decide(
    state: BucketState, knobs: Knobs, now: float, estimate: int, lease_id: str, pid: int, host: str
) -> Admit | Wait:
    """Admit a call of `estimate` input tokens now (its lease recorded), or say how long to wait."""
    probe = False
    if not state.leases and now - state.last_used >= IDLE_RESET_S:  # an earlier run's window is stale
        state.limit = float(min(knobs.initial_concurrency, knobs.max_concurrency))
        state.successes, state.slow_start = 0, True
    if state.breaker_until is not None:
        if now < state.breaker_until:
            return Wait(state.breaker_until - now, "circuit breaker open", breaker=True)
        if any(lease.probe for lease in state.leases.values()):
            return Wait(None, "circuit breaker: a probe call is in flight", breaker=True)
        probe = True
    if now < state.paused_until:
        return Wait(state.paused_until - now, state.pause_why or "paused")
    in_flight = len(state.leases)
    if in_flight >= math.floor(state.limit):
        state.full_at = now
        return Wait(None, f"{in_flight} calls in flight (limit {math.floor(state.limit)})")
    reserve = math.ceil(estimate * state.token_ratio * 1.1)
    needs = {"rpm": 1.0, "itpm": float(reserve), "otpm": 1.0, "tpm": float(reserve)}
    waits = {}
    for name, bucket in state.levels.items():
        bucket.refill(now)
        need = min(needs[name], bucket.limit)
        if bucket.level < need:
            waits[name] = (need - bucket.level) * 60 / bucket.limit
    if waits:
        name = max(waits, key=lambda n: waits[n])
        return Wait(waits[name], f"{name} bucket empty")
    for name, bucket in state.levels.items():
        if name in ("rpm", "itpm", "tpm"):
            bucket.level -= needs[name]
    if in_flight + 1 >= math.floor(state.limit):
        state.full_at = now
    state.leases[lease_id] = Lease(pid, host, now, now + knobs.lease_s, reserve, estimate, probe)
    state.last_used = now
    return Admit(lease_id, probe)


def report(
    state: BucketState, knobs: Knobs, now: float, lease_id: str, outcome: Outcome
) -> BreakerChange | None:
    """Fold one attempt's outcome into the state and free its lease; the breaker's change, if any."""
    lease = state.leases.pop(lease_id, None)
    state.last_used = max(state.last_used, now)
    _account(state, now, lease, outcome)
    note = None
    if outcome.kind == "ok":
        if state.breaker_until is not None:
            note = BreakerChange("governor_resumed", "circuit breaker closed: a probe call succeeded")
        state.failures, state.breaker_until, state.cooldown_s = 0, None, 0.0
        if lease is not None and lease.started <= state.full_at:
            state.successes += 1
            if state.slow_start or state.successes >= math.ceil(state.limit):
                state.limit = min(float(knobs.max_concurrency), state.limit + 1)
                state.successes = 0
    elif outcome.kind in ("throttled", "overloaded"):
        if lease is None or lease.started >= state.decreased_at:
            state.limit = max(1.0, state.limit / 2)
            state.successes, state.decreased_at, state.slow_start = 0, now, False
        if outcome.retry_after_s:
            until = now + outcome.retry_after_s
            if until > state.paused_until:
                state.paused_until = until
                what = "rate limited (429)" if outcome.kind == "throttled" else "overloaded"
                state.pause_why = f"{what}: Retry-After {outcome.retry_after_s:g} s"
    if outcome.kind in ("overloaded", "failed"):
        state.failures += 1
        probing = lease is not None and lease.probe
        if probing or (state.breaker_until is None and state.failures >= knobs.breaker_failures):
            state.cooldown_s = (
                min(MAX_COOLDOWN_S, state.cooldown_s * 2) if probing else knobs.breaker_cooldown_s
            )
            state.breaker_until = now + state.cooldown_s
            note = BreakerChange(
                "governor_paused",
                f"circuit breaker open for {state.cooldown_s:g} s after {state.failures} consecutive"
                " failures: new calls wait, then one probe",
            )
    elif lease is not None and lease.probe and outcome.kind == "refused":
        state.breaker_until = now  # the probe said nothing about health: let another probe go
    return note


def _account(state: BucketState, now: float, lease: Lease | None, outcome: Outcome) -> None:
    """The real tokens of the call in place of its estimate, then the server's remainders."""
    estimate = lease.estimate if lease is not None else 0
    used_input = outcome.input_tokens if outcome.input_tokens is not None else estimate
    if outcome.kind == "ok" and lease is not None and lease.raw_estimate > 0 and outcome.input_tokens:
        state.token_ratio = 0.8 * state.token_ratio + 0.2 * (outcome.input_tokens / lease.raw_estimate)
    if outcome.kind != "ok":
        used_input = 0  # a refused or failed request is not charged (the fake and the providers agree)
    for name, bucket in state.levels.items():
        bucket.refill(now)
        if name in ("itpm", "tpm"):
            bucket.level += estimate - used_input
        if name in ("otpm", "tpm"):
            bucket.level -= outcome.output_tokens
    for name, (limit, remaining) in outcome.readings.items():
        known = state.levels.get(name)
        if known is not None and not known.learned:
            continue  # the settings' limit wins; headers only teach what nobody said
        if known is None or known.limit != limit:
            level = known.level if known is not None else float(limit)
            known = state.levels[name] = Level(float(limit), min(level, float(limit)), now, learned=True)
        read_at = min(outcome.read_at or now, now)
        since = [lease for lease in state.leases.values() if lease.started > read_at]  # not in `remaining`
        taken = (
            len(since) if name == "rpm" else sum(lease.estimate for lease in since) if name != "otpm" else 0
        )
        known.level = min(known.level, remaining + (now - read_at) * limit / 60 - taken)
    for bucket in state.levels.values():
        bucket.level = min(bucket.level, bucket.limit)


def next_wake(wait: Wait, jitter: float, rng: Any) -> float:
    """How long a waiter sleeps before it asks again: the wait (or a poll), spread by `jitter` (a share
    of it, at most one second more) so that processes told the same wait do not come back at once."""
    base = POLL_S if wait.seconds is None else max(0.005, wait.seconds)
    return base + min(base * jitter, 1.0) * rng.random()  # a long pause is not stretched by much
