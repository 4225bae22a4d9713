"""One typed settings object, built once at the CLI edge and passed down.

Precedence: CLI flags > environment (`HILBERT_*`) > `hilbert.toml` (in the current directory, or the
file named by `HILBERT_CONFIG`) > defaults. Model keys come from the usual variables
(`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`) and are read by the model adapters, not stored here.

`hilbert.toml` example::

    model = "anthropic:claude-sonnet-4-5"
    max_turns = 80
    max_cost_usd = 2.5
    judge_model = "openai:gpt-5"          # the stop gate asks it for a verdict (it can only veto)
    approve_worker_proposals = true       # scope changes a worker asked for wait for `hilbert approve`
    context = "forget:2,20000"            # how agents' contexts are compacted (docs/design/context.md)
    repository_map_tokens = 1500          # the repository map in every worker's system prompt; 0: none
    reviewers = ["openai:gpt-5", "openai:qwen3-coder@http://127.0.0.1:8000/v1"]

    [families]                            # what counts as independent: default = provider prefix
    "openai:qwen3-coder" = "qwen"

    [prices."openai:my-local-model"]     # USD per million tokens
    input = 0.2
    output = 0.8
    cache_read = 0.02
    cache_write = 0.2
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hilbert.errors import ConfigError


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path.home() / ".hilbert")
    db: Path | None = None  # default: <home>/hilbert.db
    model: str | None = None
    lead_model: str | None = None  # the lead's model (planning, escalations); default: `model`
    judge_model: str | None = None  # the stop gate's model verdict; none: decided on the checks alone
    reviewers: tuple[str, ...] = ()  # the review panel's models (distinct families); none: no panel
    panel_size: int = 3  # reviewers per change, one per family
    panel_paths: tuple[str, ...] = ()  # review only changes touching these globs; empty: every change
    unsandboxed: bool = False  # accept running workers' commands without a sandbox (none found)
    # a scope change (add, split, reassign with a note) the lead makes after reading a worker's message
    # waits for `hilbert approve`; false: applied at once (the lead_action still names the messages)
    approve_worker_proposals: bool = True
    context: str | None = (
        None  # the compaction strategy's spec (hilbert.context.strategies); none: the default
    )
    repository_map_tokens: int = 1500  # the run's repository map in workers' system prompts; 0: none
    gate_rounds: int = 3  # how often the stop gate checks one attempt before it ends (sent back N-1 times)
    families: Mapping[str, str] = field(default_factory=dict)  # "provider:name" (or glob) -> family
    max_turns: int = 60
    max_cost_usd: float = 5.0
    shell_timeout_s: int = 120
    model_timeout_s: float = 120.0
    model_max_attempts: int = 6
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.db or self.home / "hilbert.db"

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Settings:
        """Build the settings from defaults, the toml file, `HILBERT_*` variables and CLI overrides."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        config = (
            Path(env["HILBERT_CONFIG"]) if "HILBERT_CONFIG" in env else (cwd or Path.cwd()) / "hilbert.toml"
        )
        if config.is_file():
            try:
                values.update(tomllib.loads(config.read_text()))
            except tomllib.TOMLDecodeError as bad:
                raise ConfigError(f"{config}: {bad}", hint="fix the TOML syntax") from None
        for f in fields(cls):
            key = f"HILBERT_{f.name.upper()}"
            if key in env and f.name not in ("prices", "families"):
                values[f.name] = env[key]
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(
                f"unknown setting(s): {', '.join(unknown)}", hint=f"known settings: {', '.join(known)}"
            )
        settings = cls()
        return replace(settings, **{k: _coerce(k, v, getattr(settings, k)) for k, v in values.items()})


def _coerce(name: str, value: Any, default: Any) -> Any:
    try:
        if name in ("home", "db"):
            return Path(value).expanduser()
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes")
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        if name in ("reviewers", "panel_paths"):
            items = value.split(",") if isinstance(value, str) else value
            return tuple(str(item).strip() for item in items if str(item).strip())
        if name == "families":
            return {str(k): str(v) for k, v in value.items()}
        if name == "prices":
            return {str(k): {str(p): float(x) for p, x in v.items()} for k, v in value.items()}
    except (TypeError, ValueError, AttributeError):
        raise ConfigError(
            f"setting {name}={value!r} has the wrong type", hint=f"expected something like {default!r}"
        ) from None
    return value
