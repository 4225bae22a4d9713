"""Fault and latency specs of the fake server: parsing the spec strings and drawing from them.

Faults: `429=0.1,500=0.05,529=0.05,hang=0.01,truncate=0.05,badjson=0.05` gives the rate of each fault
per completion request (their sum at most 1); each request draws at most one, from a RNG seeded by
`--seed`. Two options ride along: `retry_after=SECONDS` (the 429's Retry-After, default 1) and
`hang_s=SECONDS` (how long a hung request is held before the server gives up, default 300).

    429       rate limited, with Retry-After (and retry-after-ms)
    500       internal error
    529       overloaded (Anthropic's `overloaded_error`; the same status on OpenAI paths)
    hang      the request is accepted and never answered until the client disconnects (or hang_s)
    truncate  the response stops half way and the connection is dropped (no final events)
    badjson   one tool call's arguments are not valid JSON (only replies with tool calls are hit)
    401       the API key is rejected
    404       the model is unknown (`model_not_found`)
    overflow  400: the prompt is longer than the model's context window
    refused   400: the request is refused (as a provider's safety system or a malformed request would be)

Latency: a preset (`none`, the default; `realistic`) and/or `ttft=DIST,tps=DIST,chunk=N`, where DIST
is a number of seconds (tokens per second for tps), `uniform:LOW:HIGH` or `lognormal:MEDIAN:SIGMA`;
`tps` may be `inf`. Each request draws its own time to first token and speed; text and tool
arguments are streamed in chunks of `chunk` tokens, each chunk after `tokens / tps` seconds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass
from typing import Literal

from hilbert.errors import UserError
from hilbert.testing.fake_server.responder import Reply

FAULT_KINDS = ("429", "500", "529", "hang", "truncate", "badjson", "401", "404", "overflow", "refused")
Fault = Literal["429", "500", "529", "hang", "truncate", "badjson", "401", "404", "overflow", "refused"]

_FAULT_HINT = (
    f"use KIND=RATE pairs, e.g. --faults 429=0.1,529=0.05,truncate=0.05 (kinds: {', '.join(FAULT_KINDS)})"
)
_LATENCY_HINT = "use a preset (none, realistic) or e.g. --latency ttft=0.5,tps=80 or ttft=lognormal:0.4:0.5"


def _pairs(spec: str, what: str, hint: str) -> list[tuple[str, str]]:
    pairs = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            pairs.append((item.lower(), ""))
        elif not key.strip() or not value.strip():
            raise UserError(f"bad {what} spec item {item!r}", hint=hint)
        else:
            pairs.append((key.strip().lower(), value.strip()))
    return pairs


def _number(text: str, what: str, hint: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"bad {what} value {text!r}: not a number", hint=hint) from None
    if math.isnan(value) or value < 0:
        raise UserError(f"bad {what} value {text!r}: must be zero or more", hint=hint)
    return value


@dataclass(frozen=True)
class FaultSpec:
    """Fault rates, in `FAULT_KINDS` order, and the options of the faults."""

    rates: tuple[tuple[str, float], ...] = ()
    retry_after_s: float = 1.0
    hang_s: float = 300.0

    @classmethod
    def parse(cls, spec: str | None) -> FaultSpec:
        if spec is None or spec.strip().lower() in ("", "none"):
            return cls()
        rates: dict[str, float] = {}
        options = {"retry_after": 1.0, "hang_s": 300.0}
        for key, value in _pairs(spec, "fault", _FAULT_HINT):
            if key in options:
                options[key] = _number(value, f"fault option {key}", _FAULT_HINT)
            elif key in FAULT_KINDS:
                rate = _number(value, f"fault rate {key}", _FAULT_HINT)
                if rate > 1:
                    raise UserError(
                        f"bad fault rate {key}={value}: must be between 0 and 1", hint=_FAULT_HINT
                    )
                rates[key] = rate
            else:
                raise UserError(f"unknown fault {key!r} in {spec!r}", hint=_FAULT_HINT)
        if sum(rates.values()) > 1 + 1e-9:
            raise UserError(f"fault rates in {spec!r} add up to more than 1", hint=_FAULT_HINT)
        ordered = tuple((kind, rates[kind]) for kind in FAULT_KINDS if rates.get(kind))
        return cls(ordered, retry_after_s=options["retry_after"], hang_s=options["hang_s"])

    def draw(self, rng: random.Random) -> Fault | None:
        """The fault for one request, or None."""
        if not self.rates:
            return None
        roll = rng.random()
        for kind, rate in self.rates:
            if roll < rate:
                return kind  # type: ignore[return-value]
            roll -= rate
        return None

    def __str__(self) -> str:
        return ",".join(f"{kind}={rate:g}" for kind, rate in self.rates) or "none"


def corrupt_arguments(reply: Reply) -> Reply:
    """The `badjson` fault: the first tool call's arguments made invalid JSON (`{"a": 1, "oops" oops}`);
    a reply without tool calls is left as it is."""
    if not reply.tool_calls:
        return reply
    call = reply.tool_calls[0]
    text = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
    broken = text[:-1] + ', "oops" oops}' if text.endswith("}") else text + ' "oops" oops}'
    first = dataclasses.replace(call, arguments={}, raw_arguments=broken)
    return dataclasses.replace(reply, tool_calls=(first, *reply.tool_calls[1:]))


@dataclass(frozen=True)
class Distribution:
    """A non-negative random quantity: `const` (a), `uniform` (a..b) or `lognormal` (median a, sigma b)."""

    kind: Literal["const", "uniform", "lognormal"]
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str, what: str) -> Distribution:
        name, _, rest = text.partition(":")
        if not rest:
            return cls("const", _number(text, what, _LATENCY_HINT))
        params = [_number(p, what, _LATENCY_HINT) for p in rest.split(":")]
        if name in ("uniform", "lognormal") and len(params) == 2:
            if name == "uniform" and params[1] < params[0]:
                raise UserError(
                    f"bad {what} {text!r}: uniform:LOW:HIGH needs LOW <= HIGH", hint=_LATENCY_HINT
                )
            return cls(name, params[0], params[1])  # type: ignore[arg-type]
        raise UserError(f"bad {what} distribution {text!r}", hint=_LATENCY_HINT)

    def sample(self, rng: random.Random) -> float:
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        if self.kind == "lognormal":
            return self.a * math.exp(rng.gauss(0.0, self.b)) if self.a > 0 else 0.0
        return self.a


@dataclass(frozen=True)
class Pace:
    """The latency drawn for one response."""

    ttft_s: float = 0.0
    tokens_per_s: float = math.inf
    chunk_tokens: int = 4

    def delay(self, tokens: int) -> float:
        return tokens / self.tokens_per_s if tokens and self.tokens_per_s > 0 else 0.0


_MAX_DELAY_S = 120.0
_PRESETS = {
    "none": {},
    "realistic": {"ttft": "lognormal:0.6:0.4", "tps": "uniform:40:120"},
}


@dataclass(frozen=True)
class LatencySpec:
    ttft: Distribution = Distribution("const", 0.0)
    tps: Distribution = Distribution("const", math.inf)
    chunk_tokens: int = 4
    text: str = "none"

    @classmethod
    def parse(cls, spec: str | None) -> LatencySpec:
        if spec is None or not spec.strip():
            return cls()
        settings: dict[str, str] = {}
        for key, value in _pairs(spec, "latency", _LATENCY_HINT):
            if not value:
                if key not in _PRESETS:
                    raise UserError(f"unknown latency preset {key!r}", hint=_LATENCY_HINT)
                settings.update(_PRESETS[key])
            elif key in ("ttft", "tps", "chunk"):
                settings[key] = value
            else:
                raise UserError(f"unknown latency setting {key!r} in {spec!r}", hint=_LATENCY_HINT)
        chunk = _number(settings.get("chunk", "4"), "latency chunk", _LATENCY_HINT)
        if chunk < 1 or chunk != int(chunk):
            raise UserError(
                f"bad latency chunk {settings['chunk']!r}: a whole number >= 1", hint=_LATENCY_HINT
            )
        tps = Distribution.parse(settings.get("tps", "inf"), "latency tps")
        if tps.kind == "const" and tps.a == 0:
            raise UserError("bad latency tps 0: tokens per second must be above zero", hint=_LATENCY_HINT)
        return cls(
            ttft=Distribution.parse(settings.get("ttft", "0"), "latency ttft"),
            tps=tps,
            chunk_tokens=int(chunk),
            text=spec.strip(),
        )

    def draw(self, rng: random.Random) -> Pace:
        tps = self.tps.sample(rng)
        return Pace(
            ttft_s=min(self.ttft.sample(rng), _MAX_DELAY_S),
            tokens_per_s=tps if tps > 0 else math.inf,
            chunk_tokens=self.chunk_tokens,
        )

    def __str__(self) -> str:
        return self.text
