"""Settings: CLI > HILBERT_* environment > hilbert.toml > defaults, with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from hilbert.errors import ConfigError
from hilbert.models import PriceTable
from hilbert.models.types import Usage
from hilbert.settings import Settings

TOML = """
model = "anthropic:claude-sonnet-4-5"
max_turns = 80
max_cost_usd = 2.5

[prices."openai:my-model"]
input = 1.0
output = 2.0
cache_read = 0.1
cache_write = 1.0
"""


def test_precedence_cli_over_env_over_file_over_defaults(tmp_path: Path) -> None:
    (tmp_path / "hilbert.toml").write_text(TOML)
    env = {"HILBERT_MAX_TURNS": "90", "HILBERT_HOME": str(tmp_path / "home")}
    settings = Settings.load({"max_turns": None, "max_cost_usd": 1.0}, env=env, cwd=tmp_path)
    assert settings.model == "anthropic:claude-sonnet-4-5"  # file
    assert settings.max_turns == 90  # env beats file; a CLI None means "not given"
    assert settings.max_cost_usd == 1.0  # CLI beats file
    assert settings.shell_timeout_s == 120  # default
    assert settings.db_path == tmp_path / "home" / "hilbert.db"


def test_prices_from_the_file_extend_the_table(tmp_path: Path) -> None:
    (tmp_path / "hilbert.toml").write_text(TOML)
    settings = Settings.load(env={}, cwd=tmp_path)
    prices = PriceTable.default().with_overrides(settings.prices)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=500_000)
    assert prices.cost("openai:my-model", usage) == pytest.approx(0.5 * 1.0 + 0.5 * 0.1 + 2.0)
    assert prices.known("anthropic:claude-sonnet-4-5")


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ("max_turns = [1", {}, "hilbert.toml"),
        ("colour = 'blue'", {}, "unknown setting"),
        ("", {"HILBERT_MAX_TURNS": "many"}, "max_turns"),
    ],
)
def test_bad_settings_name_what_is_wrong(
    tmp_path: Path, toml: str, env: dict[str, str], message: str
) -> None:
    (tmp_path / "hilbert.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message):
        Settings.load(env=env, cwd=tmp_path)


def test_config_file_can_be_named_by_the_environment(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("max_turns = 7\n")
    assert Settings.load(env={"HILBERT_CONFIG": str(other)}, cwd=tmp_path).max_turns == 7
