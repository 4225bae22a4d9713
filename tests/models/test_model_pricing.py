"""What a call costs: the built-in table, the user's overrides, cached tokens, unknown models."""

from __future__ import annotations

import pytest

from hilbert.errors import ConfigError
from hilbert.models import ModelSpec, PriceTable, Usage


def test_cost_prices_uncached_input_cache_reads_writes_and_output_apart() -> None:
    table = PriceTable.default()
    # input 10,000 tokens of which 6,000 read from the cache and 1,000 written to it; 500 out
    usage = Usage(input_tokens=10_000, output_tokens=500, cache_read_tokens=6_000, cache_write_tokens=1_000)
    # claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million
    expected = (3_000 * 3.0 + 6_000 * 0.30 + 1_000 * 3.75 + 500 * 15.0) / 1e6
    assert table.cost("anthropic:claude-sonnet-4-5", usage) == pytest.approx(expected)
    assert table.cost(ModelSpec("anthropic", "claude-sonnet-4-5"), usage) == pytest.approx(expected)


def test_well_known_models_are_priced() -> None:
    table = PriceTable.default()
    for name in (
        "anthropic:claude-sonnet-4-5",
        "anthropic:claude-opus-4-1",
        "anthropic:claude-haiku-4-5",
        "openai:gpt-5",
        "openai:gpt-5-mini",
        "openai:gpt-4.1",
    ):
        assert table.known(name), name
        assert table.cost(name, Usage(input_tokens=1_000_000, output_tokens=1_000_000)) > 0


def test_responses_snapshots_and_local_urls_find_the_same_price() -> None:
    table = PriceTable.default()
    usage = Usage(input_tokens=1_000_000)
    gpt5 = table.cost("openai:gpt-5", usage)
    assert gpt5 == pytest.approx(1.25)
    assert table.cost("openai-responses:gpt-5", usage) == gpt5
    assert table.cost("openai:gpt-5@http://127.0.0.1:9/v1", usage) == gpt5
    assert table.cost("anthropic:claude-sonnet-4-5-20250929", usage) == pytest.approx(3.0)
    assert table.cost("openai:gpt-4.1-2025-04-14", usage) == pytest.approx(2.0)


def test_unknown_models_cost_nothing_and_say_so() -> None:
    table = PriceTable.default()
    assert not table.known("openai:my-local-model")
    assert table.cost("openai:my-local-model", Usage(input_tokens=10**6, output_tokens=10**6)) == 0.0
    assert not table.known("not even a model name")


def test_overrides_add_and_replace_prices_without_touching_the_default() -> None:
    default = PriceTable.default()
    table = default.with_overrides(
        {
            "openai:my-model": {"input": 1.0, "output": 2.0, "cache_read": 0.1, "cache_write": 1.25},
            "anthropic:claude-sonnet-4-5": {"input": 30.0, "output": 150.0},
        }
    )
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=500_000)
    assert table.known("openai:my-model")
    assert table.cost("openai:my-model", usage) == pytest.approx(0.5 * 1.0 + 0.5 * 0.1 + 2.0)
    assert table.cost("openai-responses:my-model@http://127.0.0.1:1/v1", usage) == pytest.approx(2.55)
    # cache prices default to the input price when the override leaves them out
    assert table.cost("anthropic:claude-sonnet-4-5", usage) == pytest.approx(30.0 + 150.0)
    assert not default.known("openai:my-model")
    assert default.cost("anthropic:claude-sonnet-4-5", Usage(input_tokens=10**6)) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"input": 1.0}, "missing 'output'"),
        ({"input": 1.0, "output": "cheap"}, "is not a number"),
        ({"input": -1.0, "output": 1.0}, "is negative"),
        ({"input": 1.0, "output": 1.0, "cached": 0.1}, "unknown field(s) cached"),
        ({"input": True, "output": 1.0}, "is not a number"),
    ],
)
def test_bad_overrides_are_config_errors_that_name_the_entry(entry: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PriceTable.default().with_overrides({"openai:x": entry})
    assert '[prices."openai:x"]' in caught.value.message
    assert says in caught.value.message
    assert caught.value.hint
