"""One typed settings tree, built once at the CLI edge and passed down whole.

`Settings` holds the models and paths at its top and one frozen section per concern:

    Settings            home, db, model, lead_model, judge_model, unsandboxed, families, prices
    ├── fleet           FleetSettings: workers, attempts, the merge batch, the run's cost cap, the lead,
    │                   the disk's floor and reserve
    ├── budgets         BudgetSettings: one agent's turns and cost, retries of a model call, a fleet
    │                   run's caps per run, agent, task and spend rate (also `[budget]`)
    ├── gate            GateSettings: how often the stop gate sends one attempt back
    ├── panel           PanelSettings: the review panel's models, its size, the paths it reviews
    ├── liveness        LivenessSettings: when a quiet worker is nudged, reported stuck, restarted
    ├── context         ContextSettings: the compaction strategy, the repository map's size
    ├── commands        CommandSettings: the project's test command, command slots and limits
    ├── timeouts        TimeoutSettings: shell, verify, the whole gate, merge checks, model calls
    └── governor        GovernorSettings: pacing of every model call on the machine, fallback chains

Precedence: CLI flags > environment > `hilbert.toml` (in the current directory, or the file named by
`HILBERT_CONFIG`) > defaults; `Settings.sources` remembers, per key (`fleet.workers`), where its value
came from (`hilbert config` prints them). A key of a section is `[section] key = …` in the file and
`HILBERT_SECTION__KEY` in the environment (two underscores: `HILBERT_FLEET__WORKERS=8`,
`HILBERT_TIMEOUTS__VERIFY_S=900`); a top-level key is `HILBERT_MODEL`; a table inside a section is
JSON there (`HILBERT_GOVERNOR__FALLBACK='{"worker": ["openai:gpt-5"]}'`). The tables `families` and
`prices` are read from the file only. The flat keys of earlier versions stay as aliases
(`ALIASES`: `max_turns` is `budgets.max_turns`, `HILBERT_MAX_TURNS` too). Everything is checked here,
once (`ConfigError`, one line with a hint): unknown keys (with the nearest known one), wrong types,
values out of range. Model keys come from the usual variables (`OPENAI_API_KEY`,
`ANTHROPIC_API_KEY`) and are read by the model adapters, never stored here.

This module is the bottom layer: it imports nothing of hilbert's but the errors.

`hilbert.toml` example::

    model = "anthropic:claude-sonnet-4-5"
    judge_model = "openai:gpt-5"          # the stop gate asks it for a verdict (it can only veto)
    max_turns = 80                        # an alias of [budgets] max_turns

    [fleet]
    workers = 8
    max_cost_usd = 20.0                   # the whole run's cap (`hilbert run --max-cost`)
    approve_worker_proposals = true       # scope changes a worker asked for wait for `hilbert approve`

    [budget]                              # a fleet run's caps (`[budgets]` too): soft unless `hard`
    task_usd = 2.0                        # a task across all its attempts; the work waits for approval
    hard = ["run_usd"]

    [commands]
    test = "make check"                   # the project's tests: the merge queue runs them

    [timeouts]
    verify_s = 900                        # one run of a task's verify command in the stop gate

    [context]
    strategy = "forget:2,20000"           # how agents' contexts are compacted (docs/design/context.md)
    repository_map_tokens = 1500          # the repository map in every worker's system prompt; 0: none

    [panel]
    reviewers = ["openai:gpt-5", "openai:qwen3-coder@http://127.0.0.1:8000/v1"]

    [governor]                            # on by default; limits left out are learned from headers
    max_concurrency = 64                  # calls at once per key and model, on the whole machine
    rpm = 500                             # requests per minute, when the provider's headers do not say

    [governor.fallback]                   # per role: models tried in turn when one fails for good
    worker = ["anthropic:claude-sonnet-4-5", "openai:qwen3-coder@http://127.0.0.1:8000/v1"]

    [families]                            # what counts as independent: default = provider prefix
    "openai:qwen3-coder" = "qwen"

    [prices."openai:my-local-model"]     # USD per million tokens
    input = 0.2
    output = 0.8
    cache_read = 0.02
    cache_write = 0.2
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hilbert.errors import ConfigError

MIN_REPOSITORY_MAP_TOKENS = 100  # the map's header and notes need about half of it
DEFAULT = "default"  # the source of a value nobody set


def _at_least(n: float) -> dict[str, float]:
    return {"min": n}


def _positive() -> dict[str, float]:
    return {"above": 0}


def _between(low: float, high: float) -> dict[str, float]:
    return {"min": low, "max": high}


@dataclass(frozen=True)
class FleetSettings:
    """A fleet run (`hilbert run`)."""

    workers: int = field(default=4, metadata=_at_least(1))  # agents thinking at once
    max_attempts: int = field(default=2, metadata=_at_least(1))  # per task, before it goes to the lead
    merge_batch: int = field(default=8, metadata=_at_least(1))  # candidates the merge queue checks at once
    max_cost_usd: float = field(default=50.0, metadata=_positive())  # the run's cap; workers halt, work kept
    lead_turns: int = field(default=30, metadata=_at_least(1))  # per session of the lead on escalations
    lead_sessions: int = field(default=20, metadata=_at_least(0))  # per run; later escalations stay so
    escalations_per_session: int = field(default=20, metadata=_at_least(1))  # the rest wait for the next
    max_reopens: int = field(default=2, metadata=_at_least(0))  # times the lead may reassign/split a task
    # the whole suite on a clean checkout of the tip at the end (`hilbert.fleet.final_check`): failures
    # new since base become a repair task this many times; after that they are listed
    final_repair_rounds: int = field(default=1, metadata=_at_least(0))
    # a scope change (add, split, reassign with a note) the lead makes after reading a worker's message
    # waits for `hilbert approve`; false: applied at once (the lead_action still names the messages)
    approve_worker_proposals: bool = True
    # the disk the run's folder is on (`hilbert.fleet.disk`): below `disk_min_free_mb` free, the worker
    # whose workspace grows fastest is halted and nothing new starts until there is room again; the
    # reserve (a file in the run's folder) is given up when the event log cannot write; 0: off
    disk_min_free_mb: int = field(default=128, metadata=_at_least(0))
    disk_reserve_mb: int = field(default=8, metadata=_at_least(0))
    disk_check_s: float = field(default=5.0, metadata=_positive())  # how often the disk is looked at


@dataclass(frozen=True)
class BudgetSettings:
    """What one agent may spend: `hilbert agent`, each worker's attempt (unless the plan's task sets
    its own budget), the planning lead."""

    max_turns: int = field(default=60, metadata=_at_least(1))  # model calls
    max_cost_usd: float = field(default=5.0, metadata=_positive())  # `hilbert agent`'s cap
    model_max_attempts: int = field(default=6, metadata=_at_least(1))  # tries of one model call
    # a fleet run's caps (`hilbert.fleet.budget`), 0: none. Per run, per agent, per task (all its
    # attempts and reopenings): dollars, tokens (input + output; cache reads counted apart), model
    # calls, wall seconds; and a spend rate. Soft (the work waits for `hilbert approve`) unless named
    # in `hard` (the work halts, kept). Also `[budget]`, and `hilbert run --budget CAP=VALUE`.
    run_usd: float = field(default=0.0, metadata=_at_least(0))
    run_tokens: int = field(default=0, metadata=_at_least(0))
    run_turns: int = field(default=0, metadata=_at_least(0))
    run_wall_s: float = field(default=0.0, metadata=_at_least(0))
    agent_usd: float = field(default=0.0, metadata=_at_least(0))
    agent_tokens: int = field(default=0, metadata=_at_least(0))
    agent_turns: int = field(default=0, metadata=_at_least(0))
    agent_wall_s: float = field(default=0.0, metadata=_at_least(0))
    task_usd: float = field(default=0.0, metadata=_at_least(0))
    task_tokens: int = field(default=0, metadata=_at_least(0))
    task_turns: int = field(default=0, metadata=_at_least(0))
    task_wall_s: float = field(default=0.0, metadata=_at_least(0))
    rate_usd_per_hour: float = field(default=0.0, metadata=_at_least(0))  # dollars in any rolling hour
    rate_tokens: int = field(default=0, metadata=_at_least(0))  # tokens in any rolling `rate_window_s`
    rate_window_s: float = field(default=60.0, metadata=_positive())
    hard: tuple[str, ...] = ()  # caps that halt instead of asking: hard = ["run_usd"]


@dataclass(frozen=True)
class GateSettings:
    """The stop gate (verify on a clean export, integrity, held-out tests, the judge model)."""

    rounds: int = field(default=3, metadata=_at_least(1))  # checks of one attempt (sent back rounds-1 times)
    # verify and the held-out tests again in perturbed conditions (judge/perturb.py): about two more
    # test runs per claim; off only where the checks are proven elsewhere and the runs would only cost
    differential: bool = True


@dataclass(frozen=True)
class PanelSettings:
    """The review panel: models of distinct families read each change the gate passed."""

    reviewers: tuple[str, ...] = ()  # none: no panel
    size: int = field(default=3, metadata=_at_least(2))  # reviewers per change, one per family
    paths: tuple[str, ...] = ()  # review only changes touching these globs; empty: every change


@dataclass(frozen=True)
class LivenessSettings:
    """When the fleet nudges a quiet worker, reports it stuck, restarts it as dead (fleet/liveness.py)."""

    check_s: float = field(default=10.0, metadata=_positive())  # how often the fleet looks
    nudge_after_s: float = field(default=300.0, metadata=_positive())
    stuck_after_s: float = field(default=600.0, metadata=_positive())
    dead_after_s: float = field(default=1800.0, metadata=_positive())  # no heartbeat: restarted
    restarts: int = field(default=2, metadata=_at_least(0))  # per attempt, for crashes and hangs together


@dataclass(frozen=True)
class ContextSettings:
    """What agents see: the compaction strategy (hilbert.context.strategies) and the repository map."""

    strategy: str = "forget:2,20000"  # chosen by the replay benchmark: why, in docs/bench.md
    # the run's repository map in every worker's system prompt, in tokens; 0: none
    repository_map_tokens: int = 1500


@dataclass(frozen=True)
class CommandSettings:
    """The commands the harness runs: the project's tests, and what any command may take."""

    test: str = "python -m pytest -q"  # the project's whole test suite (the merge queue's checks)
    slots: int = field(  # commands (tests, builds) at once, fleet-wide
        default_factory=lambda: max(1, os.cpu_count() or 1), metadata=_at_least(1)
    )
    cpu_s: int = field(default=600, metadata=_at_least(0))  # CPU seconds per command; 0: no limit
    # address space per command, 0: none. Off by default: RLIMIT_AS breaks runtimes that reserve much
    # more than they use (node, the JVM, Go); the sandbox brings a real memory limit.
    memory_mb: int = field(default=0, metadata=_at_least(0))
    # in the command's own control group where the machine gives one (`hilbert status` says when not);
    # 0: no limit. Processes at once, memory of all of them together, and (an rlimit) one file's size
    processes: int = field(default=1024, metadata=_at_least(0))
    group_memory_mb: int = field(default=8192, metadata=_at_least(0))
    file_mb: int = field(default=4096, metadata=_at_least(0))
    shell_policy: bool = True  # the harness's rules for shell commands; off only to measure what they stop


@dataclass(frozen=True)
class TimeoutSettings:
    """Wall-clock limits, in seconds."""

    shell_s: int = field(default=120, metadata=_positive())  # a worker's shell command (its cap)
    lead_shell_s: int = field(default=300, metadata=_positive())  # the planning lead's shell command
    verify_s: float = field(default=600.0, metadata=_positive())  # one command of the stop gate (verify)
    gate_s: float = field(default=3600.0, metadata=_positive())  # the whole stop gate on one claim
    merge_s: float = field(default=1800.0, metadata=_positive())  # one command of the merge checks
    model_s: float = field(default=120.0, metadata=_positive())  # one model call
    progress_s: float = field(default=30.0, metadata=_positive())  # a long check says it still runs


@dataclass(frozen=True)
class GovernorSettings:
    """The rate-limit governor (`hilbert.models.governor`, docs/design/governor.md): every model call of
    every run on the machine, per provider key and model, paced through one shared SQLite file."""

    enabled: bool = True
    path: Path | None = None  # the shared state; default: <home>/governor.db
    max_concurrency: int = field(default=64, metadata=_at_least(1))  # the AIMD ceiling
    initial_concurrency: int = field(default=4, metadata=_at_least(1))  # before anything is learned
    # limits per minute; 0: learned from the provider's rate-limit headers (or none when it sends none)
    rpm: int = field(default=0, metadata=_at_least(0))
    itpm: int = field(default=0, metadata=_at_least(0))  # input tokens
    otpm: int = field(default=0, metadata=_at_least(0))  # output tokens
    breaker_failures: int = field(default=5, metadata=_at_least(1))  # consecutive failures that open it
    breaker_cooldown_s: float = field(default=30.0, metadata=_positive())  # then one probe call
    lease_s: float = field(default=900.0, metadata=_positive())  # a call's slot, reclaimed after this
    jitter: float = field(default=0.2, metadata=_at_least(0))  # waits are spread by up to this share
    # role ("worker", "lead") -> models tried in turn after the role's own fails for good
    fallback: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # a self-hosted engine (vLLM, SGLang): a new attempt starts only while its KV-cache usage (from its
    # Prometheus /metrics) is below this share; 0: not gated (`hilbert.models.governor.kvcache`)
    kv_cache_max: float = field(default=0.0, metadata=_between(0, 1))
    kv_cache_metrics: str = ""  # the engine's /metrics; default: beside the workers' model's base URL
    kv_cache_poll_s: float = field(default=2.0, metadata=_positive())  # how often a waiting attempt looks


SECTIONS: dict[str, type] = {
    "fleet": FleetSettings,
    "budgets": BudgetSettings,
    "gate": GateSettings,
    "panel": PanelSettings,
    "liveness": LivenessSettings,
    "context": ContextSettings,
    "commands": CommandSettings,
    "timeouts": TimeoutSettings,
    "governor": GovernorSettings,
}
ALIASES = {  # flat keys of earlier versions (and their HILBERT_* variables) -> their place in the tree
    "max_turns": "budgets.max_turns",
    "max_cost_usd": "budgets.max_cost_usd",
    "model_max_attempts": "budgets.model_max_attempts",
    "approve_worker_proposals": "fleet.approve_worker_proposals",
    "gate_rounds": "gate.rounds",
    "reviewers": "panel.reviewers",
    "panel_size": "panel.size",
    "panel_paths": "panel.paths",
    "context": "context.strategy",  # as a string; `[context]` is the section
    "repository_map_tokens": "context.repository_map_tokens",
    "shell_timeout_s": "timeouts.shell_s",
    "model_timeout_s": "timeouts.model_s",
}
TABLES = ("families", "prices")  # top-level tables: hilbert.toml only
SECTION_ALIASES = {"budget": "budgets"}  # `[budget]` and `HILBERT_BUDGET__RUN_USD` name [budgets]


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=lambda: Path.home() / ".hilbert")
    db: Path | None = None  # default: <home>/hilbert.db
    model: str | None = None  # the workers' model (and `hilbert agent`'s)
    lead_model: str | None = None  # the lead's model (planning, escalations); default: `model`
    judge_model: str | None = None  # the stop gate's model verdict; none: decided on the checks alone
    unsandboxed: bool = False  # accept running workers' commands without a sandbox (none found)
    families: Mapping[str, str] = field(default_factory=dict)  # "provider:name" (or glob) -> family
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # USD per million tokens
    fleet: FleetSettings = field(default_factory=FleetSettings)
    budgets: BudgetSettings = field(default_factory=BudgetSettings)
    gate: GateSettings = field(default_factory=GateSettings)
    panel: PanelSettings = field(default_factory=PanelSettings)
    liveness: LivenessSettings = field(default_factory=LivenessSettings)
    context: ContextSettings = field(default_factory=ContextSettings)
    commands: CommandSettings = field(default_factory=CommandSettings)
    timeouts: TimeoutSettings = field(default_factory=TimeoutSettings)
    governor: GovernorSettings = field(default_factory=GovernorSettings)
    # where each value that was set came from (key -> "hilbert.toml", "HILBERT_X", "--flag")
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

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
        flags: Mapping[str, str] | None = None,
    ) -> Settings:
        """Build the settings from defaults, the toml file, `HILBERT_*` variables and CLI `overrides`
        (keys as in the file, `fleet.workers` or an alias; None: not given); `flags` names the CLI
        flag each override came from, for `sources`."""
        env = os.environ if env is None else env
        layers: list[tuple[str, dict[str, Any]]] = []  # (source, {key: value}), lowest precedence first
        config = (
            Path(env["HILBERT_CONFIG"]) if "HILBERT_CONFIG" in env else (cwd or Path.cwd()) / "hilbert.toml"
        )
        if config.is_file():
            try:
                table = tomllib.loads(config.read_text())
            except tomllib.TOMLDecodeError as bad:
                raise ConfigError(f"{config}: {bad}", hint="fix the TOML syntax") from None
            name = config.name if "HILBERT_CONFIG" not in env else str(config)
            layers += [(name, {k: v}) for k, v in _flatten(table, name).items()]
        layers += [(var, {key: value}) for var, key, value in _from_env(env)]
        for given, value in (overrides or {}).items():
            if value is not None:
                key = _key(given, value, "the command line")
                layers.append(((flags or {}).get(given, "the command line"), {key: value}))
        return cls.build(layers)

    @classmethod
    def of(cls, values: Mapping[str, Any], *, source: str = "given") -> Settings:
        """The defaults with `values` (keys as `hilbert config` prints them: `{"fleet.workers": 2}`)
        on top, checked like any other layer: for tests, benchmarks and demos that build their own."""
        return cls.build([(source, {_key(key, value, source): value}) for key, value in values.items()])

    @classmethod
    def build(cls, layers: list[tuple[str, dict[str, Any]]]) -> Settings:
        """Defaults with each layer's values on top, later layers winning; keys are checked and values
        coerced and range-checked, each error naming the key and where the value came from."""
        top: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        sources: dict[str, str] = {}
        for source, values in layers:
            for key, value in values.items():
                section, _, name = key.rpartition(".")
                kind = SECTIONS[section] if section else cls
                (sections[section] if section else top)[name] = _coerce(kind, name, value, key, source)
                sources[key] = source
        built = {name: replace(kind(), **sections[name]) for name, kind in SECTIONS.items()}
        settings = replace(cls(), **top, **built, sources=sources)
        _check(settings)
        return settings

    def source(self, key: str) -> str:
        """Where the value of `key` (`fleet.workers`) came from; `default` when nobody set it."""
        return self.sources.get(key, DEFAULT)

    def items(self) -> list[tuple[str, Any]]:
        """Every setting as (key, value), the top-level keys first, then each section's."""
        found = [
            (f.name, getattr(self, f.name)) for f in fields(self) if f.name not in (*SECTIONS, "sources")
        ]
        for name in SECTIONS:
            section = getattr(self, name)
            found += [(f"{name}.{f.name}", getattr(section, f.name)) for f in fields(section)]
        return found


def known_keys() -> list[str]:
    """Every key a person can set, as `hilbert config` names them."""
    top = [f.name for f in fields(Settings) if f.name not in (*SECTIONS, "sources")]
    return top + [f"{name}.{f.name}" for name, kind in SECTIONS.items() for f in fields(kind)]


def _flatten(table: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The toml file's values by key (`fleet.workers`), aliases resolved; unknown keys refused."""
    found: dict[str, Any] = {}
    for name, value in table.items():
        name = SECTION_ALIASES.get(name, name) if isinstance(value, dict) else name
        if isinstance(value, dict) and name not in (*SECTIONS, *TABLES):
            nearest = difflib.get_close_matches(name, [*SECTIONS, *TABLES], n=1)
            hint = f"did you mean [{nearest[0]}]?" if nearest else f"sections: {', '.join(SECTIONS)}"
            raise ConfigError(f"{source}: unknown section [{name}]", hint=hint)
        pairs = (
            [(f"{name}.{sub}", inner) for sub, inner in value.items()]
            if name in SECTIONS and isinstance(value, dict)
            else [(name, value)]
        )
        for given, inner in pairs:
            key = _key(given, inner, source)
            if key in found:
                raise ConfigError(f"{source}: {key} is set twice (once as an alias)", hint=f"keep only {key}")
            found[key] = inner
    return found


def _from_env(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(variable, key, value) for each `HILBERT_*` variable that names a setting: `HILBERT_MODEL`,
    `HILBERT_FLEET__WORKERS`, an alias (`HILBERT_MAX_TURNS`). Other `HILBERT_*` variables are not
    settings and are left alone, except a section's (`HILBERT_FLEET__…`), which must name a key."""
    found = []
    for var, value in sorted(env.items()):
        if not var.startswith("HILBERT_") or var == "HILBERT_CONFIG":
            continue
        name = var.removeprefix("HILBERT_").lower()
        if "__" in name:
            section, _, sub = name.partition("__")
            found.append((var, _key(f"{section}.{sub}", value, var), value))
        elif name in ALIASES or (name in _top_names() and name not in TABLES):
            found.append((var, ALIASES.get(name, name), value))
    return found


def _top_names() -> list[str]:
    return [f.name for f in fields(Settings) if f.name not in (*SECTIONS, "sources")]


def _key(given: str, value: Any, source: str) -> str:
    """The key `given` names (an alias resolved), or a `ConfigError` naming the nearest known key."""
    if given in ALIASES and not (given == "context" and isinstance(value, dict)):
        return ALIASES[given]
    if given in SECTIONS:
        raise ConfigError(
            f"{source}: {given} is a section, not a value", hint=f"write [{given}] and its keys"
        )
    section, _, rest = given.rpartition(".")
    if section in SECTION_ALIASES:
        given = f"{SECTION_ALIASES[section]}.{rest}"
    known = known_keys()
    if given in known:
        return given
    section, _, _ = given.rpartition(".")
    if section and section not in SECTIONS:
        nearest = difflib.get_close_matches(section, list(SECTIONS), n=1)
        hint = f"did you mean [{nearest[0]}]?" if nearest else f"sections: {', '.join(SECTIONS)}"
        raise ConfigError(f"{source}: unknown section {section!r} (in {given})", hint=hint)
    candidates = [k for k in known if k.startswith(section + ".")] if section else known + list(ALIASES)
    nearest = difflib.get_close_matches(given, candidates, n=1, cutoff=0.5)
    where = f"in [{section}]" if section else "at the top level"
    hint = f"did you mean {nearest[0]}?" if nearest else "`hilbert config` lists every key"
    raise ConfigError(f"{source}: unknown setting {given!r} {where}", hint=hint)


def _coerce(kind: type, name: str, value: Any, key: str, source: str) -> Any:
    """`value` as the type `kind.name` declares (strings from the environment parsed), range-checked."""
    declared = {f.name: f for f in fields(kind)}[name]
    hint_type = typing.get_type_hints(kind)[name]
    try:
        coerced = _as(hint_type, value)
    except (TypeError, ValueError, AttributeError):
        want = _describe(hint_type)
        raise ConfigError(f"{source}: {key} = {value!r} is not {want}", hint=f"give {key} {want}") from None
    low, above = declared.metadata.get("min"), declared.metadata.get("above")
    if low is not None and coerced < low:
        raise ConfigError(f"{source}: {key} = {value!r} is too small", hint=f"{key} is at least {low:g}")
    if above is not None and coerced <= above:
        raise ConfigError(f"{source}: {key} = {value!r} must be above {above:g}", hint=f"e.g. {key} = 1")
    high = declared.metadata.get("max")
    if high is not None and coerced > high:
        raise ConfigError(f"{source}: {key} = {value!r} is too large", hint=f"{key} is at most {high:g}")
    return coerced


def _as(hint_type: Any, value: Any) -> Any:
    """`value` as `hint_type` (bool, int, float, str, Path, an optional, a tuple of str, a table)."""
    args = typing.get_args(hint_type)
    if isinstance(hint_type, types.UnionType):  # X | None: "" from the environment is None
        if value is None or value == "":
            return None
        return _as(next(a for a in args if a is not type(None)), value)
    if hint_type is bool:
        if isinstance(value, bool):
            return value
        words = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False}
        return words[str(value).strip().lower()] if str(value).strip().lower() in words else _fail()
    if hint_type is int:
        if isinstance(value, bool | float):
            return _fail()
        return int(value)
    if hint_type is float:
        return _fail() if isinstance(value, bool) else float(value)
    if hint_type is str:
        return value if isinstance(value, str) else _fail()
    if hint_type is Path:
        return Path(value).expanduser() if isinstance(value, str | Path) else _fail()
    if typing.get_origin(hint_type) is tuple:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            return _fail()
        return tuple(str(item).strip() for item in items if str(item).strip())
    if isinstance(value, str):  # a table from the environment (governor.fallback) is JSON
        value = json.loads(value)
    if not isinstance(value, dict):  # a table: families, prices, governor.fallback
        return _fail()
    if args[1] is str:
        return {str(k): str(v) for k, v in value.items()}
    if typing.get_origin(args[1]) is tuple:  # governor.fallback: role -> models
        return {str(k): _as(args[1], v) for k, v in value.items()}
    return {str(k): {str(p): float(x) for p, x in v.items()} for k, v in value.items()}


def _fail() -> Any:
    raise TypeError


def _describe(hint_type: Any) -> str:
    if isinstance(hint_type, types.UnionType):
        return _describe(next(a for a in typing.get_args(hint_type) if a is not type(None)))
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string", Path: "a path"}
    if hint_type in names:
        return names[hint_type]
    return "a list of strings" if typing.get_origin(hint_type) is tuple else "a table"


def _check(settings: Settings) -> None:
    """The checks that span a value's range in ways a bound cannot say."""
    caps = [f.name for f in fields(BudgetSettings) if f.name.startswith(("run_", "agent_", "task_", "rate_"))]
    for hard in settings.budgets.hard:
        if hard not in caps or hard == "rate_window_s":
            nearest = difflib.get_close_matches(hard, caps, n=1)
            raise ConfigError(
                f"{settings.source('budgets.hard')}: budgets.hard names {hard!r}, which is not a cap",
                hint=f"did you mean {nearest[0]}?" if nearest else f"caps: {', '.join(caps)}",
            )
    tokens = settings.context.repository_map_tokens
    if tokens < 0 or 0 < tokens < MIN_REPOSITORY_MAP_TOKENS:
        where = settings.source("context.repository_map_tokens")
        raise ConfigError(
            f"{where}: context.repository_map_tokens = {tokens} is too small for a repository map",
            hint=f"give it at least {MIN_REPOSITORY_MAP_TOKENS} tokens, or 0 to leave the map out",
        )
