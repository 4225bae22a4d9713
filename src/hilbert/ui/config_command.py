"""`hilbert config`, and how every command turns its flags into the one `Settings`.

`load_settings(**options)` maps each CLI option (its click parameter name) to its key in the settings
tree (`FLAGS`), loads the settings with them on top (CLI > `HILBERT_*` > `hilbert.toml` > defaults),
and refuses a malformed context strategy at once. `hilbert config` prints every effective value, one
a line, with where it came from: `fleet.workers = 8    (hilbert.toml)`. API keys are never printed:
they are not settings (the model adapters read them from the environment).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from hilbert.errors import ConfigError, UserError
from hilbert.security.redact import Redactor
from hilbert.settings import Settings

FLAGS: dict[str, tuple[str, str]] = {  # click parameter -> (setting key, the flag a person types)
    "model": ("model", "--model"),
    "lead_model": ("lead_model", "--lead-model"),
    "judge_model": ("judge_model", "--judge-model"),
    "db": ("db", "--db"),
    "unsandboxed": ("unsandboxed", "--unsandboxed"),
    "context": ("context.strategy", "--context"),
    "workers": ("fleet.workers", "--workers"),
    "run_cost": ("fleet.max_cost_usd", "--max-cost"),
    "max_turns": ("budgets.max_turns", "--max-turns"),
    "max_cost_usd": ("budgets.max_cost_usd", "--max-cost"),
    "test_command": ("commands.test", "--test-command"),
}


def load_settings(**options: Any) -> Settings:
    """The settings with these CLI options on top (None: not given), the context strategy checked."""
    from hilbert.context.render import TokenCache
    from hilbert.context.strategies import strategy_named
    from hilbert.context.tokens import Approximate

    budgets = options.pop("budget", None) or ()  # `--budget CAP=VALUE`, repeatable
    overrides = {FLAGS[name][0]: value for name, value in options.items()}
    flags = {FLAGS[name][0]: FLAGS[name][1] for name in options}
    for given in budgets:
        cap, equals, value = given.partition("=")
        if not equals or not cap.strip():
            raise ConfigError(f"--budget {given!r} is not CAP=VALUE", hint="e.g. --budget task_usd=2")
        key = f"budgets.{cap.strip()}"
        overrides[key], flags[key] = value.strip(), "--budget"
    settings = Settings.load(overrides, flags=flags)
    try:  # a bad spec is refused before anything runs
        strategy_named(settings.context.strategy, tokens=TokenCache(Approximate()))
    except UserError as bad:
        where = settings.source("context.strategy")
        raise ConfigError(f"{where}: context.strategy: {bad.message}", hint=bad.hint) from None
    return settings


def config_lines(settings: Settings) -> list[str]:
    """`key = value    (source)` for every setting, values written as in hilbert.toml."""
    shown = {**dict(settings.items()), "db": settings.db_path}  # the log's path, also when defaulted
    pairs = [(f"{key} = {_toml(value)}", settings.source(key)) for key, value in shown.items()]
    width = 44  # sources line up, but a long value (a path) only pushes its own line's source out
    return [left + " " * max(4, width - len(left)) + f"({source})" for left, source in pairs]


def _toml(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, tuple):
        return "[" + ", ".join(json.dumps(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


@click.command("config")
@click.option("--model", "-m", help="The workers' model, as `hilbert run --model` would set it.")
@click.option("--lead-model", help="The lead's model.")
@click.option("--judge-model", help="The stop gate's judge model.")
@click.option("--workers", type=int, help="Workers thinking at once (fleet.workers).")
@click.option(
    "--max-cost", "run_cost", type=float, help="A fleet run's cost cap in USD (fleet.max_cost_usd)."
)
@click.option("--test-command", help="The project's test command (commands.test).")
@click.option("--context", metavar="SPEC", help="The context strategy (context.strategy).")
@click.option("--unsandboxed", is_flag=True, default=None, help="Accept running commands without a sandbox.")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), help="Event log file.")
def config(**options: Any) -> None:
    """Every setting's effective value and where it came from (a flag, HILBERT_* variable, hilbert.toml,
    or the default), one a line; the flags are `hilbert run`'s, to see what they would change."""
    redact = Redactor.from_env(os.environ).redact  # a model URL may carry a token
    for line in config_lines(load_settings(**options)):
        click.echo(redact(line))
