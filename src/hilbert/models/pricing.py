"""What a model call costs: a built-in price table the user can extend or override.

Prices are USD per million tokens: `input` (uncached prompt), `output`, `cache_read` (prompt read from
the provider's cache) and `cache_write` (prompt written to it). `PriceTable.cost` follows the token
convention of `hilbert.models.types.Usage`: uncached input = input - cache reads - cache writes.

Keys are `provider:name`. OpenAI Chat and OpenAI Responses bill the same models, so an `openai:` entry
also prices `openai-responses:`; a dated snapshot (`claude-sonnet-4-5-20250929`, `gpt-4.1-2025-04-14`)
falls back to its undated name; a bare `name` key matches every provider. An unknown model costs 0.0
and `known()` says False, so callers can tell "free" from "not priced".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hilbert.errors import ConfigError, UserError
from hilbert.models.names import ModelSpec, parse_model_name
from hilbert.models.types import Usage


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


def _anthropic(inp: float, out: float) -> Price:
    # Anthropic: cache reads are 0.1x input, 5-minute cache writes 1.25x input.
    return Price(inp, out, round(inp * 0.1, 6), round(inp * 1.25, 6))


def _openai(inp: float, out: float, cached: float) -> Price:
    # OpenAI caches automatically and bills cache writes as ordinary input.
    return Price(inp, out, cached, inp)


# Estimates from the providers' public price pages as of 2025-11; check them before trusting a bill,
# and override in hilbert.toml ([prices."provider:name"]) when they change.
_DEFAULT_PRICES: dict[str, Price] = {
    "anthropic:claude-opus-4-5": _anthropic(5.0, 25.0),
    "anthropic:claude-opus-4-1": _anthropic(15.0, 75.0),
    "anthropic:claude-opus-4-0": _anthropic(15.0, 75.0),
    "anthropic:claude-opus-4": _anthropic(15.0, 75.0),
    "anthropic:claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "anthropic:claude-sonnet-4-0": _anthropic(3.0, 15.0),
    "anthropic:claude-sonnet-4": _anthropic(3.0, 15.0),
    "anthropic:claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "anthropic:claude-haiku-4-5": _anthropic(1.0, 5.0),
    "anthropic:claude-3-5-haiku": _anthropic(0.8, 4.0),
    "openai:gpt-5.1": _openai(1.25, 10.0, 0.125),
    "openai:gpt-5": _openai(1.25, 10.0, 0.125),
    "openai:gpt-5-codex": _openai(1.25, 10.0, 0.125),
    "openai:gpt-5-mini": _openai(0.25, 2.0, 0.025),
    "openai:gpt-5-nano": _openai(0.05, 0.40, 0.005),
    "openai:gpt-4.1": _openai(2.0, 8.0, 0.50),
    "openai:gpt-4.1-mini": _openai(0.40, 1.60, 0.10),
    "openai:gpt-4.1-nano": _openai(0.10, 0.40, 0.025),
    "openai:gpt-4o": _openai(2.50, 10.0, 1.25),
    "openai:gpt-4o-mini": _openai(0.15, 0.60, 0.075),
    "openai:o3": _openai(2.0, 8.0, 0.50),
    "openai:o4-mini": _openai(1.10, 4.40, 0.275),
}

_FAMILY = {"anthropic": "anthropic", "openai": "openai", "openai-responses": "openai"}
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_FIELDS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class PriceTable:
    """Prices by `provider:name`; build with `default()` and extend with `with_overrides()`."""

    prices: Mapping[str, Price] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def default(cls) -> PriceTable:
        return cls(MappingProxyType(dict(_DEFAULT_PRICES)))

    def with_overrides(self, overrides: Mapping[str, Mapping[str, Any]]) -> PriceTable:
        """A new table where each `{"provider:name": {"input": .., "output": .., "cache_read": ..,
        "cache_write": ..}}` entry replaces or adds a price. `input` and `output` are required;
        `cache_read` and `cache_write` default to the input price. Raises `ConfigError` on bad entries."""
        merged = dict(self.prices)
        for key, entry in overrides.items():
            merged[key.strip()] = _price_from(key, entry)
        return PriceTable(MappingProxyType(merged))

    def price(self, model: ModelSpec | str) -> Price | None:
        for key in _candidate_keys(model):
            if key in self.prices:
                return self.prices[key]
        return None

    def known(self, model: ModelSpec | str) -> bool:
        return self.price(model) is not None

    def cost(self, model: ModelSpec | str, usage: Usage) -> float:
        """USD for `usage` on `model`; 0.0 when the model is not in the table."""
        price = self.price(model)
        if price is None:
            return 0.0
        uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
        micro_usd = (
            uncached * price.input
            + usage.cache_read_tokens * price.cache_read
            + usage.cache_write_tokens * price.cache_write
            + usage.output_tokens * price.output
        )
        return micro_usd / 1_000_000


def _candidate_keys(model: ModelSpec | str) -> list[str]:
    provider, name = _provider_and_name(model)
    names = [name]
    undated = _DATE_SUFFIX.sub("", name)
    if undated != name:
        names.append(undated)
    keys: list[str] = []
    for candidate in names:
        if provider:
            keys.append(f"{provider}:{candidate}")
            family = _FAMILY.get(provider)
            if family and family != provider:
                keys.append(f"{family}:{candidate}")
        keys.append(candidate)
    return keys


def _provider_and_name(model: ModelSpec | str) -> tuple[str | None, str]:
    if isinstance(model, ModelSpec):
        return model.provider, model.name
    try:
        spec = parse_model_name(model)
    except UserError:
        return None, model.strip()
    return spec.provider, spec.name


def _price_from(key: str, entry: Mapping[str, Any]) -> Price:
    where = f'[prices."{key}"]'
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be a table of prices", hint=_PRICE_HINT)
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise ConfigError(f"{where} has unknown field(s) {', '.join(unknown)}", hint=_PRICE_HINT)
    for required in ("input", "output"):
        if required not in entry:
            raise ConfigError(f"{where} is missing {required!r}", hint=_PRICE_HINT)
    values: dict[str, float] = {}
    for name in _FIELDS:
        value = entry.get(name, entry["input"])
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ConfigError(f"{where} {name} = {value!r} is not a number", hint=_PRICE_HINT)
        if value < 0:
            raise ConfigError(f"{where} {name} = {value!r} is negative", hint=_PRICE_HINT)
        values[name] = float(value)
    return Price(**values)


_PRICE_HINT = "prices are USD per million tokens: input, output, cache_read, cache_write (numbers)"
