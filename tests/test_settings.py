"""Settings: one tree of sections, CLI > HILBERT_* environment > hilbert.toml > defaults, each value
remembering where it came from, refused in one line when wrong; `hilbert config` shows them all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_support import run_cli
from hilbert.errors import ConfigError
from hilbert.models import PriceTable
from hilbert.models.types import Usage
from hilbert.settings import Settings, known_keys

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
    (tmp_path / "hilbert.toml").write_text(TOML + "\n[fleet]\nworkers = 8\nmax_attempts = 3\n")
    env = {
        "HILBERT_MAX_TURNS": "90",
        "HILBERT_HOME": str(tmp_path / "home"),
        "HILBERT_FLEET__WORKERS": "6",
    }
    settings = Settings.load(
        {"max_turns": None, "max_cost_usd": 1.0, "fleet.workers": 12},
        env=env,
        cwd=tmp_path,
        flags={"fleet.workers": "--workers"},
    )
    assert settings.model == "anthropic:claude-sonnet-4-5"  # file
    assert settings.budgets.max_turns == 90  # env beats file; a CLI None means "not given"
    assert settings.budgets.max_cost_usd == 1.0  # CLI beats file
    assert settings.fleet.workers == 12 and settings.fleet.max_attempts == 3
    assert settings.timeouts.shell_s == 120  # default
    assert settings.db_path == tmp_path / "home" / "hilbert.db"
    assert [settings.source(key) for key in ("model", "budgets.max_turns", "fleet.workers")] == [
        "hilbert.toml",
        "HILBERT_MAX_TURNS",
        "--workers",
    ]
    assert settings.source("fleet.max_attempts") == "hilbert.toml"
    assert settings.source("timeouts.verify_s") == "default"


def test_every_section_is_reachable_from_the_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "hilbert.toml").write_text(
        '[commands]\ntest = "make check"\ncpu_s = 0\n[timeouts]\nverify_s = 900\n'
        '[panel]\nreviewers = ["openai:a", "anthropic:b"]\n[context]\nstrategy = "none"\n'
    )
    env = {
        "HILBERT_LIVENESS__STUCK_AFTER_S": "120",
        "HILBERT_GATE__ROUNDS": "5",
        "HILBERT_UNSANDBOXED": "yes",
    }
    settings = Settings.load(env=env, cwd=tmp_path)
    assert settings.commands.test == "make check" and settings.commands.cpu_s == 0
    assert settings.timeouts.verify_s == 900.0
    assert settings.panel.reviewers == ("openai:a", "anthropic:b")
    assert settings.context.strategy == "none"
    assert settings.liveness.stuck_after_s == 120.0 and settings.gate.rounds == 5
    assert settings.unsandboxed is True
    # each key has its variable: HILBERT_<SECTION>__<KEY>
    for key in known_keys():
        if key in ("families", "prices"):
            continue  # tables: hilbert.toml only
        var = "HILBERT_" + key.upper().replace(".", "__")
        value = dict(Settings().items())[key]
        text = ",".join(value) if isinstance(value, tuple) else ("" if value is None else str(value))
        assert Settings.load(env={var: text}, cwd=tmp_path / "none").source(key) == var


def test_the_old_flat_keys_still_work(tmp_path: Path) -> None:
    (tmp_path / "hilbert.toml").write_text(
        'context = "mask:5,5"\ngate_rounds = 2\nreviewers = ["openai:a"]\npanel_size = 2\n'
        "shell_timeout_s = 30\nmodel_timeout_s = 60\napprove_worker_proposals = false\n"
        "repository_map_tokens = 0\n"
    )
    settings = Settings.load(env={"HILBERT_PANEL_PATHS": "src/,docs/*"}, cwd=tmp_path)
    assert settings.context.strategy == "mask:5,5" and settings.context.repository_map_tokens == 0
    assert (
        settings.gate.rounds == 2 and settings.panel.size == 2 and settings.panel.reviewers == ("openai:a",)
    )
    assert settings.panel.paths == ("src/", "docs/*")
    assert settings.timeouts.shell_s == 30 and settings.timeouts.model_s == 60.0
    assert settings.fleet.approve_worker_proposals is False


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
        ("colour = 'blue'", {}, "unknown setting 'colour' at the top level"),
        (
            "[fleet]\nworker = 3",
            {},
            r"unknown setting 'fleet.worker' in \[fleet\] — did you mean fleet.workers\?",
        ),
        ("[flet]\nworkers = 3", {}, r"unknown section \[flet\] — did you mean \[fleet\]\?"),
        ("fleet = 3", {}, r"fleet is a section"),
        ("max_turns = 3\n[budgets]\nmax_turns = 4", {}, "budgets.max_turns is set twice"),
        (
            "",
            {"HILBERT_MAX_TURNS": "many"},
            "HILBERT_MAX_TURNS: budgets.max_turns = 'many' is not a whole number",
        ),
        ("", {"HILBERT_FLEET__WROKERS": "2"}, "HILBERT_FLEET__WROKERS: unknown setting 'fleet.wrokers'"),
        (
            "[fleet]\nworkers = 0",
            {},
            "hilbert.toml: fleet.workers = 0 is too small — fleet.workers is at least 1",
        ),
        ("[timeouts]\nverify_s = 0", {}, "timeouts.verify_s = 0 must be above 0"),
        ("[fleet]\napprove_worker_proposals = 'maybe'", {}, "is not true or false"),
        ("repository_map_tokens = 50", {}, "repository_map_tokens = 50 is too small for a repository map"),
        ("[commands]\ntest = 3", {}, "commands.test = 3 is not a string"),
    ],
)
def test_bad_settings_are_refused_in_one_line_naming_the_key_and_where_it_came_from(
    tmp_path: Path, toml: str, env: dict[str, str], message: str
) -> None:
    (tmp_path / "hilbert.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message) as refused:
        Settings.load(env=env, cwd=tmp_path)
    assert "\n" not in str(refused.value)


def test_config_file_can_be_named_by_the_environment(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("max_turns = 7\n")
    settings = Settings.load(env={"HILBERT_CONFIG": str(other)}, cwd=tmp_path)
    assert settings.budgets.max_turns == 7 and settings.source("budgets.max_turns") == str(other)


def test_hilbert_config_prints_every_value_with_its_source(tmp_path: Path) -> None:
    (tmp_path / "hilbert.toml").write_text(
        'model = "openai:gpt-5"\n[fleet]\nworkers = 8\nmax_cost_usd = 3.5\n[commands]\ntest = "make check"\n'
    )
    env = {
        "PATH": os.environ["PATH"],
        "HILBERT_HOME": str(tmp_path / "home"),
        "HILBERT_TIMEOUTS__VERIFY_S": "900",
        "OPENAI_API_KEY": "sk-secret-never-printed-0123456789",
    }
    shown = run_cli("config", "--workers", "12", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    lines = {line.split(" = ")[0]: line for line in shown.stdout.splitlines()}
    assert set(lines) == set(known_keys())  # every setting, one a line
    assert lines["fleet.workers"].split() == ["fleet.workers", "=", "12", "(--workers)"]
    assert lines["fleet.max_cost_usd"].split() == ["fleet.max_cost_usd", "=", "3.5", "(hilbert.toml)"]
    assert lines["commands.test"].startswith('commands.test = "make check"  ')
    assert lines["commands.test"].endswith("  (hilbert.toml)")
    assert lines["timeouts.verify_s"].split() == [
        "timeouts.verify_s",
        "=",
        "900",
        "(HILBERT_TIMEOUTS__VERIFY_S)",
    ]
    assert lines["gate.rounds"].split() == ["gate.rounds", "=", "3", "(default)"]
    assert "sk-secret" not in shown.stdout
    refused = run_cli("config", "--context", "forget:many", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--context: context.strategy" in refused.stderr
