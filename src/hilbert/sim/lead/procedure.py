"""How the simulated lead plans: run the tests, find the project function each failing test calls,
write one task per function, finish.

`plan_work(brief, final_task)` is a generator: it yields actions (the engineer's `Run`, `Read`,
`ListFiles`, `Finish`, and `WritePlan`) and is sent the `Observation` of each, so the responder can
replay it from a conversation. It reads only what the tools answered, never the file system.

The lead reads each failing test file once (a long one: its first page and the pages where its failing
tests are) and finds what each failing test calls the way the engineer does (`tested_names`: the first
call to a name the file imports, else what else its body or its test class names; the test's name
when its body cannot be found). A task's verify runs its failing tests and the function's passing
ones (a fix that passes the first by breaking the second would otherwise be verified, then rejected
by the merge queue's whole-suite check); tasks on functions of one module claim that module together
(`allow_shared_claims`: the merge queue catches real conflicts). When the survey's output is too long
for the shell tool, the lead greps the copy the tool saved for the failing tests' lines (and pages
through it when grep cannot show them all: `whole_output`).
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Generator, Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from hilbert.sim.engineer.actions import Finish, Grep, ListFiles, Observation, Read, Run
from hilbert.sim.engineer.reading import (
    class_of,
    grep_hits,
    imported_names,
    numbered_page,
    test_span,
    tested_names,
)

TEST_COMMAND = "python -m pytest -q"
SURVEY_COMMAND = f"{TEST_COMMAND} -rfE --tb=no"
DEFAULT_GOAL = "Make the test suite pass"
PAGE_LINES = 400  # lines of a saved output asked for at once (read_file may answer fewer, saying so)
_FAILED = re.compile(r"^(?:FAILED|ERROR) ([^\s:]+\.py)(?:::(\S+))?", re.MULTILINE)
_CLIPPED = re.compile(r"… \[[\d,]+ more chars\]$")  # a line grep showed in part
_GREP_CUT = re.compile(r"^\[\.\.\. [\d,]+ matches more\]$", re.MULTILINE)  # grep showed not all it found
_NUMBERED = re.compile(r"^\s*\d+\t", re.MULTILINE)
_NUMBERED_LINE = re.compile(r"^\s*\d+\t(.*)$")
_SAVED = re.compile(
    r"\[\.\.\. [\d,]+ more bytes; the whole output is in (\S+?)(?: \(cut at [\d,]+ bytes\))?\]"
)
_MORE = re.compile(r"^\[lines? [\d,–]+ of [\d,]+ shown; call read_file with start_line=\d+\]$", re.MULTILINE)
_FROM = re.compile(r"^from\s+([\w.]+)\s+import\s+(\([^)]*\)|[\w \t,]*)", re.MULTILINE)
_IMPORT = re.compile(r"^import\s+([\w.]+(?:\s*,\s*[\w.]+)*)", re.MULTILINE)
_TEST_DEF = re.compile(r"^(?:async\s+)?def (test\w*)\(", re.MULTILINE)
_SHOWN_TESTS = 12


@dataclass(frozen=True)
class WritePlan:
    """Call write_plan with this goal and these tasks (dicts in the tool's schema)."""

    goal: str
    tasks: tuple[dict[str, Any], ...]
    why: str = ""


@dataclass
class Group:
    """Failing tests that one task fixes: those calling `function` of the module `claims[0]`, or
    (when the function is not known) those of `test_files`, claiming what those files import.
    `checks` are the tests its verify runs: the failing ones and the function's passing ones."""

    claims: tuple[str, ...]
    function: str | None
    tests: list[str] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)


LeadAction = Run | Read | Grep | ListFiles | WritePlan | Finish
Steps = Generator[LeadAction, Observation, None]


def plan_work(brief: str, *, final_task: bool = False) -> Steps:
    survey = yield Run(SURVEY_COMMAND, why="First, which tests fail?")
    failing = failing_tests((yield from whole_output(survey.text)))
    files: set[str] = set()
    if failing:
        listed = yield ListFiles("**/*.py", why="Which source files are there?")
        files = set(listed.text.splitlines())
    groups: dict[tuple[str, ...], Group] = {}
    for test_file, tests in failing.items():
        source = yield from read_tests(test_file, tests)
        group_tests(groups, test_file, tests, source, files - {test_file})
    tasks = build_tasks(list(groups.values()), final_task=final_task)
    answer = yield WritePlan(goal_of(brief), tasks, why="The plan: one task per function with failing tests.")
    if not answer.ok:  # fix it once, from what the error says is wrong
        goal = _plain(goal_of(brief)) if "goal" in answer.text else goal_of(brief)
        dependencies = not any(word in answer.text for word in ("depend", "cycle"))
        tasks = build_tasks(list(groups.values()), final_task=final_task and dependencies)
        answer = yield WritePlan(goal, tasks, why="Fixing the plan after write_plan's error.")
    summary = survey.text.strip().splitlines()[-1:] or ["(no test output)"]
    if answer.ok:
        count = sum(len(tests) for tests in failing.values())
        claim = f"{answer.text.strip()}: {count} failing tests, one task per function they call"
    else:
        claim = "I could not write a valid plan"
    yield Finish(claim=claim, evidence=f"{SURVEY_COMMAND}: {summary[0]}\nwrite_plan: {answer.text.strip()}")


def whole_output(text: str) -> Generator[LeadAction, Observation, str]:
    """`text`, or, when the tool cut it short and saved the whole output to a file, the lines of it
    that name a failing test, found with grep (more-itertools seed 29: a bug in `sieve` failed 40,426
    subtests, 3.3 MB of `SUBFAILED` lines; read a page at a time, they took the lead's 60 calls before
    any plan); when grep shows not all of them, or a test's id in part (a line is cut at 300
    characters; its message after ` - ` may be), the file's lines, read a page at a time (when a page
    does not fit, read_file says where to go on from)."""
    saved = _SAVED.search(text)
    if saved is None:
        return text
    why = "The output was cut; finding the failing tests in it."
    found = yield Grep(_FAILED.pattern, saved.group(1), why=why)
    hits = [hit.text for hit in grep_hits(found.text)]
    cut = [hit for hit in hits if _CLIPPED.search(hit) and " - " not in hit]  # within its test's id
    if found.ok and not _GREP_CUT.search(found.text) and not cut:
        return "\n".join(hits)
    lines: list[str] = []
    while True:
        first = len(lines) + 1
        page = yield Read(
            saved.group(1), first, first + PAGE_LINES - 1, why="The output was cut; reading all of it."
        )
        got = [m.group(1) for raw in page.text.splitlines() if (m := _NUMBERED_LINE.match(raw))]
        lines += got
        if not page.ok or not got or (len(got) < PAGE_LINES and not _MORE.search(page.text)):
            break
    return "\n".join(lines) if lines else text


def read_tests(path: str, tests: list[str]) -> Generator[LeadAction, Observation, str]:
    """A test file's text: whole when one read shows all of it; else its first page (the imports)
    and, found with grep, the pages where the failing tests and their classes are (the rest blank)."""
    read = yield Read(path, why=f"Which functions do the failing tests of {path} call?")
    page = numbered_page(read.text) if read.ok else None
    if page is None or page[2] is None:
        return _NUMBERED.sub("", read.text)
    lines = [*page[1], *[""] * (page[2] - len(page[1]))]
    known = set(range(len(page[1])))
    names = {part.split("[", 1)[0] for test in tests for part in test.partition("::")[2].split("::") if part}
    pattern = f"^ *(async +)?(def|class) +({'|'.join(sorted(names))})\\b"
    found = yield Run(
        f"grep -nE {shlex.quote(pattern)} {shlex.quote(path)}", why=f"Where are they in {path}?"
    )
    for line in sorted({int(m.group(1)) for m in re.finditer(r"^(\d+):", found.text, re.M)}):
        if line - 1 in known or line > len(lines):
            continue
        more = yield Read(path, line, why=f"Reading {path} from line {line}.")
        if (part := numbered_page(more.text) if more.ok else None) is not None:
            lines[part[0] - 1 : part[0] - 1 + len(part[1])] = part[1]
            known.update(range(part[0] - 1, part[0] - 1 + len(part[1])))
    return "\n".join(lines)


def failing_tests(output: str) -> dict[str, list[str]]:
    """Failing (or erroring) test ids by test file, in the order pytest reported them."""
    failing: dict[str, list[str]] = {}
    for match in _FAILED.finditer(output):
        tests = failing.setdefault(match.group(1), [])
        test_id = f"{match.group(1)}::{match.group(2)}" if match.group(2) else match.group(1)
        if test_id not in tests:
            tests.append(test_id)
    return failing


def group_tests(
    groups: dict[tuple[str, ...], Group], test_file: str, tests: list[str], source: str, files: set[str]
) -> None:
    """Add the failing `tests` of `test_file` (its text is `source`) to the groups, keyed by the
    module and function each one calls; a test whose function is not found joins its file's group.
    The passing tests of the file that call a grouped function join that group's checks: a fix
    must keep them passing too."""
    lines = source.splitlines()
    names = imported_names(lines)
    modules = imported_modules(source, files)
    for test_id in tests:
        target = _target(test_id, lines, names, modules, files)
        if target:
            group = groups.setdefault(("function", *target), Group((target[0],), target[1]))
        else:
            key = ("file", *modules) if modules else ("file?", test_file)
            group = groups.setdefault(key, Group(modules, None))
        group.tests.append(test_id)
        group.checks.append(test_id)
        if test_file not in group.test_files:
            group.test_files.append(test_file)
    for name in _TEST_DEF.findall(source):
        test_id = f"{test_file}::{name}"
        target = _target(test_id, lines, names, modules, files)
        sibling = groups.get(("function", *target)) if target else None
        if sibling and not any(t == test_id or t.startswith(f"{test_id}[") for t in sibling.checks):
            sibling.checks.append(test_id)


def _target(
    test_id: str, lines: list[str], names: dict[str, str], modules: tuple[str, ...], files: set[str]
) -> tuple[str, str] | None:
    """(module file, function) that a test calls, or None when either is unknown."""
    located = {name for name, module in names.items() if _locate(module, files) is not None}
    outside = set(names) - located if located or modules else set()  # a layout not understood: none
    function = _function_of(test_id, lines, names, outside)
    module = _locate(names[function], files) if function in names else None
    if function and module is None and len(modules) == 1:
        module = modules[0]
    return (module, function) if function and module else None


def _function_of(
    test_id: str, lines: list[str], names: dict[str, str], outside: Set[str] = frozenset()
) -> str | None:
    """The function a test calls, from its body (a method found in its class or a mixin) or, for a
    test whose body calls nothing of the project, from what its test class names; else the imported
    name its name starts with. Names imported from outside the project (`outside`: the standard
    library's `Decimal` the test builds its arguments with) come after the project's."""
    node = test_id.partition("::")[2]
    name = node.rsplit("::", 1)[-1].split("[", 1)[0]
    span = test_span(lines, node) if node else None
    tested = tested_names(lines, span, "", class_of(lines, node)) if span else []
    ours = [n for n in tested if n not in outside]
    called = next((n for n in ours if n in names), ours[0] if ours else None)
    called = called or next(iter(tested), None)
    if called in names or not name:
        return called
    named = [n for n in names if n not in outside and (name == f"test_{n}" or name.startswith(f"test_{n}_"))]
    return max(named, key=len) if named else called


def _locate(dotted: str, known: set[str]) -> str | None:
    """The project file of a dotted module name (a `src/` layout is understood), if it exists."""
    base = dotted.replace(".", "/")
    for prefix in ("", "src/"):
        for candidate in (f"{prefix}{base}.py", f"{prefix}{base}/__init__.py"):
            if candidate in known:
                return candidate
    return None


def imported_modules(source: str, files: Iterable[str]) -> tuple[str, ...]:
    """The project's files that `source` imports, found among `files` (relative paths; a `src/`
    layout is understood). `from pkg import mod` names `pkg/mod.py` when that file exists."""
    known = set(files)
    found: list[str] = []
    for module, names in _FROM.findall(source):
        named = [
            _locate(f"{module}.{name.strip()}", known)
            for name in names.strip("()").split(",")
            if name.strip()
        ]
        hits: list[str | None] = [path for path in named if path] or [_locate(module, known)]
        found += [path for path in hits if path is not None and path not in found]
    for group in _IMPORT.findall(source):
        for module in (part.strip() for part in group.split(",")):
            if (path := _locate(module, known)) and path not in found:
                found.append(path)
    return tuple(found)


def build_tasks(groups: list[Group], *, final_task: bool) -> tuple[dict[str, Any], ...]:
    """One task per group; tasks whose claims overlap share them (`allow_shared_claims`)."""
    claimed = Counter(claim for group in groups for claim in group.claims)
    tasks: list[dict[str, Any]] = []
    for number, group in enumerate(groups, start=1):
        tests, count = group.tests, len(group.tests)
        shown = [f"- `{test}`" for test in tests[:_SHOWN_TESTS]]
        if count > _SHOWN_TESTS:
            shown.append(f"- … and {count - _SHOWN_TESTS} more")
        failing = f"{count} failing test{'s' * (count != 1)}"
        if group.function:
            title = f"Fix `{group.function}` in {group.claims[0]} ({failing})"
            what = f"They call `{group.function}`, which they import from `{group.claims[0]}`."
            if passing := len(group.checks) - count:
                what += (
                    f" The verify command also runs its {passing} passing test{'s' * (passing != 1)}:"
                    " a fix must keep them passing."
                )
            verify = f"{TEST_COMMAND} {' '.join(shlex.quote(test) for test in group.checks)}"
        else:
            subject = ", ".join(group.claims) if group.claims else ", ".join(group.test_files)
            title = f"Fix {subject} ({failing})"
            what = f"They test `{subject}`." if group.claims else "I could not tell which module they test."
            verify = f"{TEST_COMMAND} {' '.join(shlex.quote(f) for f in group.test_files)}"
        shared = [claim for claim in group.claims if claimed[claim] > 1]
        notes = [what]
        if shared:
            notes.append(
                f"Other tasks fix other functions of {', '.join(f'`{c}`' for c in shared)} at the same "
                "time, so the tasks share their claims (allow_shared_claims); the functions are separate "
                "and the merge queue catches any real conflict."
            )
        task: dict[str, Any] = {
            "id": f"T{number}",
            "title": title,
            "description": "\n".join(
                ["These tests fail:", *shown, "", *notes, "Fix the code; do not change the tests."]
            ),
            "verify": verify,
            "claims": list(group.claims),
        }
        if shared:
            task["allow_shared_claims"] = True
        tasks.append(task)
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
