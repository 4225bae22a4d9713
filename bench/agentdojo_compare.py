"""AgentDojo's injected instructions against a gullible scripted agent: undefended, behind a keyword filter,
and behind hilbert's mechanisms (tool outputs fenced as untrusted data, a task-scoped tool policy).

    python bench/agentdojo_compare.py                                  # all suites, six attacks (~minutes)
    python bench/agentdojo_compare.py --suites banking --attacks direct --limit 3

agentdojo (pinned, 0.1.35) lives in its own venv so that it cannot disturb hilbert's dependencies:

    python3 -m venv .venv-agentdojo && .venv-agentdojo/bin/pip install agentdojo==0.1.35 -e .

and this script re-runs itself with that venv's Python when agentdojo is not importable here.

For each suite of AgentDojo's benchmark (`--version`, default v1.2.2, its current one), each attack, each
user task and each injection task, the attack writes its text (the injection task's goal in the attack's
template) into the places the user task's ground truth reads; the agent (`dojo_bench.agent`) does the user
task and obeys every injected goal it reads; AgentDojo's own checks say whether the user task was done
(utility) and whether the injection task's goal was reached (attack success). Each defense
(`dojo_bench.agent.DEFENSES`) runs on the same injected environment. The user tasks also run without an
attack, for utility and to count how often a defense hit the task's own work (an output dropped, a call
refused).

The scope is derived from the user task alone, before the agent reads any tool output: from the ground
truth on the environment without injections (`dojo_bench.defenses.scope_from_plan`). That is an oracle
planner for the tool names; `prompt args` pins only argument values the user's request states, `oracle args`
pins every value, including those the task's data supplies (a planner could not know them).

Prints three tables, the injection tasks that still succeed behind the prompt-derived scope, and the
figures as key=value on the last line. Exit 0 whatever the rates; 2 with one line on bad input.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dojo_bench.report import NO_ATTACK, Run

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv-agentdojo" / "bin" / "python"
ATTACKS = (
    "important_instructions",
    "ignore_previous",
    "direct",
    "system_message",
    "injecagent",
    "tool_knowledge",
)
VERSION = "v1.2.2"


def _agentdojo_or_reexec() -> None:
    try:
        import agentdojo  # noqa: F401
    except ImportError:
        if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
            os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])
        sys.exit(
            "agentdojo is not installed: python3 -m venv .venv-agentdojo && "
            ".venv-agentdojo/bin/pip install agentdojo==0.1.35 -e ."
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suites", default="", help="comma-separated (default: all of the version)")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated attack names")
    parser.add_argument("--limit", type=int, default=0, help="the first N user and injection tasks per suite")
    parser.add_argument("--version", default=VERSION, help="AgentDojo benchmark version")
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    args = parser.parse_args(argv)
    _agentdojo_or_reexec()
    import warnings

    from agentdojo.attacks.attack_registry import ATTACKS as REGISTRY
    from agentdojo.task_suite.load_suites import get_suites

    from dojo_bench.agent import DEFENSES
    from dojo_bench.report import figures, leaks, overall_table, split_table

    warnings.filterwarnings("ignore")  # agentdojo's and its SDKs' deprecation noise
    known = get_suites(args.version)
    if not known:
        print(f"unknown AgentDojo version {args.version!r}", file=sys.stderr)
        return 2
    names = [s for s in args.suites.split(",") if s] or list(known)
    attacks = [a for a in args.attacks.split(",") if a]
    bad = [s for s in names if s not in known] + [a for a in attacks if a not in REGISTRY]
    if bad or args.limit < 0:
        print(f"unknown suite or attack: {', '.join(bad) or args.limit}; suites: {', '.join(known)}; "
              f"attacks: {', '.join(sorted(REGISTRY))}", file=sys.stderr)  # fmt: skip
        return 2
    started = time.perf_counter()
    jobs = [job for name in names for job in jobs_for(known[name], attacks, args.limit)]
    skipped = {name: feasible(known[name], args.limit)[1] for name in names}
    runs: list[Run] = []
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for done in pool.imap_unordered(functools.partial(run_job, args.version), jobs):
                runs += done
    else:
        for job in jobs:
            runs += run_job(args.version, job)
    wall = time.perf_counter() - started
    defenses = [d.name for d in DEFENSES]
    from importlib.metadata import version as installed

    version = installed("agentdojo")
    print(f"AgentDojo {version}, benchmark {args.version}: {', '.join(names)}")
    print("\nOverall (all attacks pooled):\n")
    print("\n".join(overall_table(runs, defenses)))
    print("\nAttack success % / utility under attack %, per attack:\n")
    print("\n".join(split_table(runs, defenses, "attack")))
    print("\nAttack success % / utility under attack %, per suite:\n")
    print("\n".join(split_table(runs, defenses, "suite")))
    for defense in ("fences + scope: prompt args", "fences + scope: oracle args"):
        print(f"\nInjection tasks that still succeed behind '{defense}':")
        print("\n".join(f"  {line}" for line in leaks(runs, defense)) or "  none")
    for name, ids in skipped.items():
        if ids:
            print(f"not run ({name}: no ground truth, the scripted agent cannot do them): {', '.join(ids)}")
    errors = sorted({f"{r.suite}/{r.attack}: {r.error}" for r in runs if r.error})
    for error in errors[:10]:
        print(f"error: {error}")
    print(figures(runs, defenses, wall))
    return 0


def jobs_for(suite: Any, attacks: Sequence[str], limit: int, chunk: int = 4) -> list[Job]:
    """The work for one suite, in pieces small enough to share between processes."""
    users = list(suite.user_tasks)[: limit or None]
    pieces = [tuple(users[i : i + chunk]) for i in range(0, len(users), chunk)]
    return [Job(suite.name, NO_ATTACK, piece, limit) for piece in pieces] + [
        Job(suite.name, attack, piece, limit) for attack in attacks for piece in pieces
    ]


@dataclass(frozen=True)
class Job:
    suite: str
    attack: str
    user_tasks: tuple[str, ...]
    limit: int


def feasible(suite: Any, limit: int) -> tuple[dict[str, Any], list[str]]:
    """The injection tasks the scripted agent can carry out (a ground truth or an answer to give), and the
    others' ids."""
    clean = load_environment(suite, {})
    tasks = dict(list(suite.injection_tasks.items())[: limit or None])
    able = {
        i: t for i, t in tasks.items() if t.ground_truth(clean.model_copy(deep=True)) or t.GROUND_TRUTH_OUTPUT
    }
    return able, [i for i in tasks if i not in able]


def run_job(version: str, job: Job) -> list[Run]:
    """Every defense on every (user task, injection task) pair of `job`, each pair's environment injected
    once; AgentDojo's checks run once per distinct outcome (same executed calls and answer: same result)."""
    from agentdojo.attacks.attack_registry import ATTACKS as REGISTRY
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.task_suite.load_suites import get_suites
    from agentdojo.task_suite.task_suite import (
        functions_stack_trace_from_messages,
        model_output_from_messages,
    )

    from dojo_bench.agent import DEFENSES, GullibleAgent, Harness
    from dojo_bench.defenses import scope_from_plan

    suite = get_suites(version)[job.suite]
    injection_tasks, _ = feasible(suite, job.limit)
    clean = load_environment(suite, {})
    users = [suite.user_tasks[i] for i in job.user_tasks]
    scopes = {}
    for task in users:  # fixed before any tool output is read, from the environment without injections
        plan = task.ground_truth(task.init_environment(clean.model_copy(deep=True)))
        calls = [(c.function, dict(c.args)) for c in plan]
        scopes[task.ID] = {d.scope: scope_from_plan(calls, task.PROMPT, d.scope) for d in DEFENSES if d.scope}

    def run_pair(task: Any, injection: Any, injections: dict[str, str]) -> list[Run]:
        start = task.init_environment(load_environment(suite, injections))
        checked: dict[str, tuple[bool, bool]] = {}
        results = []
        for defense in DEFENSES:
            harness = Harness(defense, scopes[task.ID][defense.scope] if defense.scope else None)
            agent = GullibleAgent(task, injection_tasks, harness)
            env = start.model_copy(deep=True)
            _, _, env, messages, _ = agent.query(task.PROMPT, FunctionsRuntime(suite.tools), env)
            output, trace = (
                model_output_from_messages(messages) or [],
                functions_stack_trace_from_messages(messages),
            )
            key = json.dumps([[c.function, c.args] for c in trace] + [output], sort_keys=True, default=str)
            if key not in checked:
                utility = suite._check_task_result(task, output, start, env, trace)
                attacked = bool(injection) and suite._check_task_result(injection, output, start, env, trace)
                checked[key] = (utility, attacked)
            utility, attacked = checked[key]
            results.append(
                Run(suite.name, job.attack, defense.name, task.ID, injection.ID if injection else "", utility,
                    attacked, len(harness.tally.refused), harness.tally.filtered)
            )  # fmt: skip
        return results

    runs: list[Run] = []
    if job.attack == NO_ATTACK:
        for task in users:
            runs += run_pair(task, None, {})
        return runs
    target = GullibleAgent(users[0], injection_tasks, Harness(DEFENSES[0], None))
    attack = REGISTRY[job.attack](suite, target)
    for task in users:
        for injection in injection_tasks.values():
            try:
                injections = attack.attack(task, injection)
            except ValueError as error:  # e.g. tool_knowledge without placeholder arguments
                runs.append(
                    Run(suite.name, job.attack, "", task.ID, injection.ID, False, False, error=str(error))
                )
                continue
            runs += run_pair(task, injection, injections)
    return runs


def load_environment(suite: Any, injections: dict[str, str]) -> Any:
    """`suite.load_and_inject_default_environment`, with libyaml's parser where there is one (5-10x faster
    on the workspace suite's environment; the same result)."""
    import yaml
    from agentdojo.task_suite.task_suite import read_suite_file, validate_injections

    text = read_suite_file(suite.name, "environment.yaml", suite.data_path)
    defaults = _defaults(suite)
    validate_injections(injections, defaults)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(text.format(**dict(defaults, **injections)), Loader=loader)
    return suite.environment_type.model_validate(data)


@functools.cache
def _defaults(suite: Any) -> dict[str, str]:
    return dict(suite.get_injection_vector_defaults())


if __name__ == "__main__":
    sys.exit(main())
