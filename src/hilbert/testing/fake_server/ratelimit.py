"""The fake server's rate limits: requests, input tokens and output tokens per minute, per API key and
model, answered as the providers answer them: a 429 with Retry-After over a limit, and their
rate-limit headers on every completion response (200s too).

Spec: `rpm=600,itpm=200000,otpm=40000` (any of the three; a limit left out is not enforced), and a
change mid-run: `change_after=30,factor=0.5` multiplies every limit by 0.5 once 30 seconds have
passed since the server's first completion request (a factor above 1 raises them). `burst=S` makes
each bucket hold only S seconds of its refill (default 60: a whole minute's limit): providers enforce
a per-minute limit over shorter periods too (OpenAI's rate-limit guide: "60,000 requests/minute may
be enforced as 1,000 requests/second"), and a benchmark needs a burst small next to its length.

Algorithm: a token bucket per limit, per (API key, model) — the key is the request's `x-api-key`, or
its `Authorization: Bearer` token. A bucket holds at most LIMIT × burst/60 (LIMIT by default) and
refills continuously at LIMIT/60 per second, so a burst of that much passes at once and then LIMIT a
minute. A request is admitted when
every bucket holds what it needs: 1 request; its input tokens (the whole prompt as `usage.py` counts
it, cached or not; a prompt larger than the whole limit needs a full bucket, so it waits rather than
never passing); 1 output token. Admission takes the request and the input tokens at once. Output
tokens are only known once the responder has answered: they are taken then, before the response is
sent, and may drive the bucket below zero; the debt refuses later requests until it is refilled (a
provider may also reserve an estimate such as `max_tokens` up front; this fake only settles).
A refused request takes nothing. Retry-After is the wait until every bucket would hold what the
request needs, rounded up to whole seconds (and `retry-after-ms`, as the fault 429 sends it). When
the limits change, each bucket's level is cut to the new limit and refills at the new rate.

Headers (names and formats checked 2026-12-03 on the providers' rate-limit pages, as the search
tool holds them):
- OpenAI, https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers (its
  `guides/rate-limits.md` table, "Rate limits in headers"): `x-ratelimit-{limit,remaining,reset}-
  {requests,tokens}`; reset is "the time until the rate limit ... resets to its initial state", as a
  duration (`1s`, `6m0s`; real responses also show `12ms`). OpenAI has one token limit: the `tokens`
  headers here report the input and output buckets together (limits and remainders added, the later
  reset).
- Anthropic, https://docs.anthropic.com/en/api/rate-limits (response headers table; read in its
  German edition, /de/api/rate-limits): `retry-after` (seconds), `anthropic-ratelimit-{requests,
  tokens,input-tokens,output-tokens}-{limit,remaining,reset}`; reset is when the limit is fully
  replenished, in RFC 3339 (`2025-08-21T12:40:59Z`). The `tokens` triple adds input and output, as a
  recorded real response does (limit 96000 = 80000 input + 16000 output). Anthropic rounds token
  remainders to the nearest thousand; this fake reports them exactly, so a client sees every token
  it spends.

The clock is injectable (`RateLimiter(spec, clock=...)`, monotonic seconds): tests move time instead of
sleeping. Wall-clock resets are that clock plus the offset to `time.time()` taken at construction.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hilbert.errors import UserError
from hilbert.testing.fake_server.faults import _number, _pairs

_HINT = (
    "use KEY=VALUE pairs, e.g. --rate-limit rpm=600,itpm=200000,otpm=40000,change_after=30,factor=0.5"
    " (limits: rpm itpm otpm; change_after=SECONDS with factor=F changes them mid-run;"
    " burst=SECONDS of refill a bucket holds, default 60)"
)
LIMITS = ("rpm", "itpm", "otpm")
_NAMES = {"rpm": "requests", "itpm": "input-tokens", "otpm": "output-tokens"}
_EPSILON = 1e-9


@dataclass(frozen=True)
class RateLimitSpec:
    """Limits per minute (`rpm`, `itpm`, `otpm`: None when not enforced) and the change mid-run."""

    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None
    change_after_s: float | None = None
    factor: float = 1.0
    burst_s: float = 60.0

    @classmethod
    def parse(cls, spec: str | None) -> RateLimitSpec | None:
        """The spec, or None for no rate limits (`None`, empty, `none`). Bad specs raise UserError."""
        if spec is None or spec.strip().lower() in ("", "none"):
            return None
        settings: dict[str, float] = {}
        for key, value in _pairs(spec, "rate-limit", _HINT):
            if key not in (*LIMITS, "change_after", "factor", "burst"):
                raise UserError(f"unknown rate-limit setting {key!r} in {spec!r}", hint=_HINT)
            if not value:
                raise UserError(f"bad rate-limit setting {key!r}: needs a value, {key}=N", hint=_HINT)
            number = _number(value, f"rate-limit {key}", _HINT)
            if key in LIMITS and (number < 1 or number != int(number)):
                raise UserError(f"bad rate-limit {key}={value}: a whole number >= 1", hint=_HINT)
            if key in ("factor", "burst") and number == 0:
                raise UserError(f"bad rate-limit {key}=0: must be above zero", hint=_HINT)
            settings[key] = number
        if not any(key in settings for key in LIMITS):
            raise UserError(f"rate-limit spec {spec!r} sets no limit (rpm, itpm or otpm)", hint=_HINT)
        if ("change_after" in settings) != ("factor" in settings):
            raise UserError(f"rate-limit spec {spec!r}: change_after and factor go together", hint=_HINT)
        limits = {key: int(settings[key]) if key in settings else None for key in LIMITS}
        return cls(
            **limits,
            change_after_s=settings.get("change_after"),
            factor=settings.get("factor", 1.0),
            burst_s=settings.get("burst", 60.0),
        )

    def limit(self, name: str, changed: bool) -> float | None:
        base: int | None = getattr(self, name)
        if base is None:
            return None
        return base * self.factor if changed else float(base)

    def __str__(self) -> str:
        parts = [f"{key}={getattr(self, key)}" for key in LIMITS if getattr(self, key) is not None]
        if self.change_after_s is not None:
            parts += [f"change_after={self.change_after_s:g}", f"factor={self.factor:g}"]
        if self.burst_s != 60.0:
            parts.append(f"burst={self.burst_s:g}")
        return ",".join(parts)

    def capacity(self, limit: float) -> float:
        """What a bucket of this per-minute limit holds when full."""
        return limit * self.burst_s / 60


@dataclass
class _Bucket:
    level: float
    updated: float


@dataclass(frozen=True)
class Reading:
    """One limit as the headers report it: its name (`requests`, `input-tokens`, `output-tokens`), the
    limit, what remains (floored, never below 0) and the seconds until the bucket is full again."""

    name: str
    limit: int
    remaining: int
    reset_s: float


@dataclass(frozen=True)
class Refusal:
    """A request over a limit: the seconds until it would pass, and the limits it is over."""

    wait_s: float
    limits: tuple[str, ...]


@dataclass
class RateLimiter:
    """The buckets of one server. `admit` before answering, `settle` once the output is known,
    `headers` for every response. Thread-safe."""

    spec: RateLimitSpec
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[tuple[str, str, str], _Bucket] = field(default_factory=dict, init=False)
    _started: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._wall_offset = time.time() - self.clock()

    def _change_at(self) -> float | None:
        if self.spec.change_after_s is None or self._started is None:
            return None
        return self._started + self.spec.change_after_s

    def _bucket(self, who: tuple[str, str], name: str, now: float) -> tuple[_Bucket, float] | None:
        """The bucket brought up to `now` and its current limit, or None if `name` is not limited."""
        change_at = self._change_at()
        limit = self.spec.limit(name, changed=change_at is not None and now >= change_at)
        if limit is None:
            return None
        full = self.spec.capacity(limit)
        bucket = self._buckets.get((*who, name))
        if bucket is None:
            bucket = self._buckets[(*who, name)] = _Bucket(full, now)
            return bucket, limit
        if change_at is not None and bucket.updated < change_at <= now:
            before = self.spec.limit(name, changed=False) or limit
            refilled = bucket.level + (change_at - bucket.updated) * before / 60
            bucket.level = min(self.spec.capacity(before), refilled)
            bucket.level, bucket.updated = min(bucket.level, full), change_at
        bucket.level = min(full, bucket.level + (now - bucket.updated) * limit / 60)
        bucket.updated = now
        return bucket, limit

    def admit(self, who: tuple[str, str], input_tokens: int) -> Refusal | None:
        """Admit one request of (API key, model) with this many input tokens: None when it passes (the
        request and its input are taken), else why not and for how long."""
        with self._lock:
            now = self.clock()
            if self._started is None:
                self._started = now
            needs = {"rpm": 1.0, "itpm": float(input_tokens), "otpm": 1.0}
            waits: dict[str, float] = {}
            held = []
            for name, need in needs.items():
                state = self._bucket(who, name, now)
                if state is None:
                    continue
                bucket, limit = state
                need = min(need, self.spec.capacity(limit))
                if bucket.level < need - _EPSILON:
                    waits[_NAMES[name]] = (need - bucket.level) * 60 / limit
                held.append((bucket, need if name != "otpm" else 0.0))
            if waits:
                return Refusal(max(waits.values()), tuple(waits))
            for bucket, need in held:
                bucket.level -= need
            return None

    def settle(self, who: tuple[str, str], output_tokens: int) -> None:
        """Take the output tokens of an admitted request, once its reply is known."""
        with self._lock:
            state = self._bucket(who, "otpm", self.clock())
            if state is not None:
                state[0].level -= output_tokens

    def readings(self, who: tuple[str, str]) -> list[Reading]:
        with self._lock:
            now = self.clock()
            readings = []
            for name in LIMITS:
                state = self._bucket(who, name, now)
                if state is not None:
                    bucket, limit = state
                    reset = max(0.0, (self.spec.capacity(limit) - bucket.level) * 60 / limit)
                    remaining = max(0, math.floor(bucket.level + _EPSILON))
                    readings.append(Reading(_NAMES[name], round(limit), remaining, reset))
            return readings

    def headers(
        self, who: tuple[str, str], protocol: str, retry_after_s: float | None = None
    ) -> dict[str, str]:
        """The rate-limit headers of a response on `protocol` (Anthropic's for `anthropic`, else
        OpenAI's), with Retry-After when the request was refused."""
        readings = self.readings(who)
        if protocol == "anthropic":
            headers = anthropic_headers(readings, self.clock() + self._wall_offset)
        else:
            headers = openai_headers(readings)
        if retry_after_s is not None:
            headers["retry-after"] = str(max(1, math.ceil(retry_after_s - _EPSILON)))
            headers["retry-after-ms"] = str(max(1, math.ceil(retry_after_s * 1000 - _EPSILON)))
        return headers


def api_key(headers: Mapping[str, str]) -> str:
    """The API key of a request: `x-api-key`, else the `Authorization: Bearer` token ('' if none)."""
    if headers.get("x-api-key"):
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _with_tokens(readings: list[Reading]) -> list[Reading]:
    """The readings, and `tokens`: the input and output buckets together, when either is limited."""
    tokens = [r for r in readings if r.name.endswith("-tokens")]
    if not tokens:
        return readings
    total = Reading(
        "tokens",
        sum(r.limit for r in tokens),
        sum(r.remaining for r in tokens),
        max(r.reset_s for r in tokens),
    )
    return [*readings, total]


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's reset headers write it (Go's `time.Duration`): `12ms`, `1.5s`, `6m0s`."""
    ms = math.ceil(seconds * 1000 - _EPSILON)
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{secs}s"


def openai_headers(readings: list[Reading]) -> dict[str, str]:
    headers = {}
    for reading in _with_tokens(readings):
        if reading.name in ("requests", "tokens"):
            headers[f"x-ratelimit-limit-{reading.name}"] = str(reading.limit)
            headers[f"x-ratelimit-remaining-{reading.name}"] = str(reading.remaining)
            headers[f"x-ratelimit-reset-{reading.name}"] = go_duration(reading.reset_s)
    return headers


def rfc3339(wall: float) -> str:
    """A unix time as Anthropic's reset headers write it, rounded up to the second: `2025-08-21T12:40:59Z`."""
    return datetime.fromtimestamp(math.ceil(wall - _EPSILON), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def anthropic_headers(readings: list[Reading], wall_now: float) -> dict[str, str]:
    headers = {}
    for reading in _with_tokens(readings):
        prefix = f"anthropic-ratelimit-{reading.name}"
        headers[f"{prefix}-limit"] = str(reading.limit)
        headers[f"{prefix}-remaining"] = str(reading.remaining)
        headers[f"{prefix}-reset"] = rfc3339(wall_now + reading.reset_s)
    return headers
