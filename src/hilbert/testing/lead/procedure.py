"""How the simulated lead plans: run the tests, map each failing test file to the module it tests,
write one task per module, finish.

`plan_work(brief, final_task)` is a generator: it yields actions (the engineer's `Run`, `Read`,
`ListFiles`, `Finish`, and `WritePlan`) and is sent the `Observation` of each, so the policy can
replay it from a conversation. It reads only what the tools answered, never the file system.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

from hilbert.testing.engineer.actions import Finish, ListFiles, Observation, Read, Run

TEST_COMMAND = "python -m pytest -q"
SURVEY_COMMAND = f"{TEST_COMMAND} -rfE --tb=no"
DEFAULT_GOAL = "Make the test suite pass"
_FAILED = re.compile(r"^(?:FAILED|ERROR) ([^\s:]+\.py)(?:::(\S+))?", re.MULTILINE)
_NUMBERED = re.compile(r"^\s*\d+\t", re.MULTILINE)
_FROM = re.compile(r"^from\s+([\w.]+)\s+import\s+(\([^)]*\)|[\w \t,]*)", re.MULTILINE)
_IMPORT = re.compile(r"^import\s+([\w.]+(?:\s*,\s*[\w.]+)*)", re.MULTILINE)
_SHOWN_TESTS = 12


@dataclass(frozen=True)
class WritePlan:
    """Call write_plan with this goal and these tasks (dicts in the tool's schema)."""

    goal: str
    tasks: tuple[dict[str, Any], ...]
    why: str = ""


LeadAction = Run | Read | ListFiles | WritePlan | Finish
Steps = Generator[LeadAction, Observation, None]


def plan_work(brief: str, *, final_task: bool = False) -> Steps:
    survey = yield Run(SURVEY_COMMAND, why="First, which tests fail?")
    failing = failing_tests(survey.text)
    files: set[str] = set()
    if failing:
        listed = yield ListFiles("**/*.py", why="Which source files are there?")
        files = set(listed.text.splitlines())
    modules: dict[str, tuple[str, ...]] = {}
    for test_file in failing:
        read = yield Read(test_file, 1, 40, why=f"Which module does {test_file} test?")
        modules[test_file] = imported_modules(_NUMBERED.sub("", read.text), files - {test_file})
    tasks = build_tasks(failing, modules, final_task=final_task)
    answer = yield WritePlan(goal_of(brief), tasks, why="The plan: one task per module with failing tests.")
    if not answer.ok:  # fix it once, from what the error says is wrong
        goal = _plain(goal_of(brief)) if "goal" in answer.text else goal_of(brief)
        dependencies = not any(word in answer.text for word in ("depend", "cycle"))
        tasks = build_tasks(failing, modules, final_task=final_task and dependencies)
        answer = yield WritePlan(goal, tasks, why="Fixing the plan after write_plan's error.")
    summary = survey.text.strip().splitlines()[-1:] or ["(no test output)"]
    if answer.ok:
        claim = f"{answer.text.strip()}: {len(failing)} failing test files, one task per module"
    else:
        claim = "I could not write a valid plan"
    yield Finish(claim=claim, evidence=f"{SURVEY_COMMAND}: {summary[0]}\nwrite_plan: {answer.text.strip()}")


def failing_tests(output: str) -> dict[str, list[str]]:
    """Failing (or erroring) test ids by test file, in the order pytest reported them."""
    failing: dict[str, list[str]] = {}
    for match in _FAILED.finditer(output):
        tests = failing.setdefault(match.group(1), [])
        test_id = f"{match.group(1)}::{match.group(2)}" if match.group(2) else match.group(1)
        if test_id not in tests:
            tests.append(test_id)
    return failing


def imported_modules(source: str, files: Iterable[str]) -> tuple[str, ...]:
    """The project's files that `source` imports, found among `files` (relative paths; a `src/`
    layout is understood). `from pkg import mod` names `pkg/mod.py` when that file exists."""
    known = set(files)
    found: list[str] = []

    def locate(dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for prefix in ("", "src/"):
            for candidate in (f"{prefix}{base}.py", f"{prefix}{base}/__init__.py"):
                if candidate in known:
                    return candidate
        return None

    for module, names in _FROM.findall(source):
        named = [locate(f"{module}.{name.strip()}") for name in names.strip("()").split(",") if name.strip()]
        hits: list[str | None] = [path for path in named if path] or [locate(module)]
        found += [path for path in hits if path is not None and path not in found]
    for group in _IMPORT.findall(source):
        for module in (part.strip() for part in group.split(",")):
            if (path := locate(module)) and path not in found:
                found.append(path)
    return tuple(found)


def build_tasks(
    failing: dict[str, list[str]], modules: dict[str, tuple[str, ...]], *, final_task: bool
) -> tuple[dict[str, Any], ...]:
    """One task per group of claimed modules (test files that test the same modules share one)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for test_file in failing:
        key = modules.get(test_file) or (f"?{test_file}",)  # unmapped: a task of its own, no claims
        groups.setdefault(key, []).append(test_file)
    tasks: list[dict[str, Any]] = []
    for number, (claims, test_files) in enumerate(groups.items(), start=1):
        claims = tuple(c for c in claims if not c.startswith("?"))
        tests = [test for file in test_files for test in failing[file]]
        shown = [f"- `{test}`" for test in tests[:_SHOWN_TESTS]]
        if len(tests) > _SHOWN_TESTS:
            shown.append(f"- … and {len(tests) - _SHOWN_TESTS} more")
        subject = ", ".join(claims) if claims else ", ".join(test_files)
        what = f"They test `{subject}`." if claims else "I could not tell which module they test."
        tasks.append(
            {
                "id": f"T{number}",
                "title": f"Fix {subject} ({len(tests)} failing test{'s' * (len(tests) != 1)})",
                "description": "\n".join(
                    ["These tests fail:", *shown, "", what, "Fix the code; do not change the tests."]
                ),
                "verify": f"{TEST_COMMAND} {' '.join(shlex.quote(f) for f in test_files)}",
                "claims": list(claims),
            }
        )
    if not tasks:
        tasks.append(
            {
                "id": "T1",
                "title": "Whole suite green",
                "description": "No test fails now; keep the whole suite passing.",
                "verify": TEST_COMMAND,
            }
        )
    elif final_task:
        tasks.append(
            {
                "id": f"T{len(tasks) + 1}",
                "title": "Whole suite green",
                "description": "Once every other task is merged, the whole test suite passes.",
                "verify": TEST_COMMAND,
                "depends_on": [task["id"] for task in tasks],
            }
        )
    return tuple(tasks)


def goal_of(brief: str) -> str:
    """The goal: the brief's first paragraph."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", brief.strip())]
    return paragraphs[0] if paragraphs and paragraphs[0] else DEFAULT_GOAL


def _plain(goal: str) -> str:
    """The goal's first line without markdown that could break PLAN.md (headings, fences)."""
    return re.sub(r"[#`]+", "", goal.splitlines()[0]).strip() or DEFAULT_GOAL
