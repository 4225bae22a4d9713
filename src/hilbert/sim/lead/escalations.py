"""How the simulated lead answers escalations: read each escalated task's reason, then decide.

The brief is `hilbert.fleet.escalation.escalation_brief`'s text; the tools are `EscalationToolBox`'s.
For each escalated task, in the brief's order:

- its check can never pass (pytest collected nothing or cannot find the file: exit 4 or 5, "no tests
  ran", "not found"), or the lead reopened it before (reassigned, or it is a part of a split task) and
  it failed again → `mark_impossible`, unless it is over several failing tests of one class: then
  split once more, one part per test (the fleet's `max_reopens` bounds how often);
- it did not land (out of turns, or the stop gate still refused) and its check runs several test
  files → `split_task`, one part per file (a task that several bugs break is more than one attempt's
  work; each part's may be one); a check of one file whose failing tests (as the task lists them)
  are in several test classes → one part per class; several failing tests of one class → one part
  per test;
- otherwise → `reassign`, with a note fitted to the reason (a merge conflict: start from the new
  tip; a claim the harness's check refuted: run the check before finishing);
- if a reassign or a split is refused (reopened too often), → `mark_impossible`.

Then each candidate held for its decision (a worker's change after it read a peer's message,
`hilbert.fleet.tainted`): `decide_candidate`, rejecting a change that touches a test, a conftest or
the CI (a peer steering the checks), approving any other. Then `finish`, listing what it did. Like
the planning procedure it is a generator the responder replays from the conversation, and it reads
only what it was told, never the file system.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from hilbert.sim.engineer.actions import Finish, Observation

_SECTION = re.compile(r"^## (\S+) — (.*)$", re.MULTILINE)
_VERIFY = re.compile(r"^verify: `(.*)`$", re.MULTILINE)
_REOPENED = re.compile(r"^attempts: \d+ \(reopened before: (\d+)\)$", re.MULTILINE)
_WHY = re.compile(r"^why the last attempt did not land:$", re.MULTILINE)
_CANDIDATES = "\nCandidates held for your decision"
_CANDIDATE = re.compile(r"^### (P\d+) — held candidate", re.MULTILINE)
_FILES = re.compile(r"^files it changes:\n```text\n(.*?)\n?```", re.MULTILINE | re.DOTALL)
_MESSAGE = re.compile(r"^- from [^\n]*:\n```text\n.*?```", re.MULTILINE | re.DOTALL)  # no ``` in a text
_CHECKS = re.compile(r"(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$|\.ci/|\.github/)")
_HOPELESS = re.compile(r"\bexit [45]\b|no tests ran|not found|No such file", re.IGNORECASE)
_CLAIMS = re.compile(r"^claims: (.*)$", re.MULTILINE)
MAX_PARTS = 8  # of a task split by its failing tests
_LISTED = re.compile(r"^> - `([^`\s]+\.py::[^`\s]+)`", re.MULTILINE)  # a failing test the task lists


@dataclass(frozen=True)
class Steer:
    """Call one of the escalation tools with these arguments."""

    tool: str
    arguments: dict[str, Any]
    why: str = ""


@dataclass(frozen=True)
class Escalated:
    task: str
    verify: str
    reopened: int
    reason: str
    claims: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()  # the failing tests what the task asks lists (the planner's list)


EscalationAction = Steer | Finish
Steps = Generator[EscalationAction, Observation, None]


def answer_escalations(brief: str) -> Steps:
    done: list[str] = []
    for case in read_brief(brief):
        step = decide(case)
        answer, tool = (yield step), step.tool
        if tool in ("reassign", "split_task") and not answer.ok:
            reason = f"reopening it was refused ({answer.text.strip()[:200]}); it does not land"
            tool = "mark_impossible"
            answer = yield Steer(tool, {"task": case.task, "reason": reason}, why="Then it stops.")
        verb = {"reassign": "reassigned", "split_task": "split"}.get(tool, "marked impossible")
        done.append(f"{case.task} {verb}" if answer.ok else f"{case.task}: {answer.text.strip()[:200]}")
    for proposal, paths in read_candidates(brief):
        checks = [path for path in paths if _CHECKS.search(path)]
        why = f"it changes {', '.join(checks)} after its worker read a peer's message" if checks else ""
        answer = yield Steer(
            "decide_candidate", {"proposal": proposal, "approve": not checks, "why": why}, why=why
        )
        done.append(f"{proposal} {'rejected' if checks else 'approved'}" if answer.ok else answer.text[:200])
    yield Finish(
        claim="Answered the escalations: " + ("; ".join(done) or "none were listed"),
        evidence="Decided from each task's reason in the brief.",
    )


def read_candidates(brief: str) -> list[tuple[str, list[str]]]:
    """The held candidates of a brief, in order: each proposal's id and the paths its change touches
    (`git diff --name-status`). The peers' messages are dropped first: their text may look like a
    section of its own."""
    brief = _MESSAGE.sub("", brief)
    heads = list(_CANDIDATE.finditer(brief))
    found = []
    for n, head in enumerate(heads):
        body = brief[head.end() : heads[n + 1].start() if n + 1 < len(heads) else len(brief)]
        files = _FILES.search(body)
        lines = files.group(1).splitlines() if files else []
        found.append((head.group(1), [line.split("\t")[-1] for line in lines if "\t" in line]))
    return found


def read_brief(brief: str) -> list[Escalated]:
    """The escalated tasks of an escalation brief, in order."""
    brief = brief.split(_CANDIDATES, 1)[0]
    heads = list(_SECTION.finditer(brief))
    cases = []
    for n, head in enumerate(heads):
        body = brief[head.end() : heads[n + 1].start() if n + 1 < len(heads) else len(brief)]
        asks, *why = _WHY.split(body, maxsplit=1)  # its own line: a quoted description's "> why ..." is not
        verify = _VERIFY.search(body)
        reopened = _REOPENED.search(body)
        claims = _CLAIMS.search(body)
        listed = claims.group(1) if claims and claims.group(1) != "(none)" else ""
        cases.append(
            Escalated(
                task=head.group(1),
                verify=verify.group(1) if verify else "",
                reopened=int(reopened.group(1)) if reopened else 0,
                reason=(why[0] if why else body).strip(),
                claims=tuple(c.strip() for c in listed.split(",") if c.strip()),
                listed=tuple(_LISTED.findall(asks)),
            )
        )
    return cases


def decide(case: Escalated) -> Steer:
    if hopeless := _HOPELESS.search(case.reason):
        reason = f"its check `{case.verify}` cannot pass as written ({hopeless.group(0)})"
        return Steer("mark_impossible", {"task": case.task, "reason": reason}, why=f"{case.task}: {reason}.")
    if case.reopened:  # a part of a split task too: once more, split by its tests, else it stops
        if "conflict" not in case.reason and len(parts := split_by_test(case)) > 1:
            return _per_test(case, parts)
        reason = f"reopened {case.reopened} time(s) already and it still did not land"
        return Steer("mark_impossible", {"task": case.task, "reason": reason}, why=f"{case.task}: {reason}.")
    if "conflict" not in case.reason and len(parts := split_by_file(case)) > 1:
        why = f"{case.task} did not land on {len(parts)} test files: one task per file."
        return Steer("split_task", {"task": case.task, "into": parts}, why=why)
    if "conflict" not in case.reason and len(parts := split_by_class(case)) > 1:
        why = (
            f"{case.task} did not land on the failing tests of {len(parts)} test classes: one task per class."
        )
        return Steer("split_task", {"task": case.task, "into": parts}, why=why)
    if "conflict" not in case.reason and len(parts := split_by_test(case)) > 1:
        return _per_test(case, parts)
    if "conflict" in case.reason:
        note = (
            "The last attempt conflicted with work merged meanwhile; "
            "you start from the new tip, so redo the fix there."
        )
    else:
        note = (
            f"The last attempts did not pass the harness's check. Run `{case.verify}` yourself, read every "
            "failure, and finish only when it passes."
        )
    return Steer(
        "reassign", {"task": case.task, "note": note}, why=f"{case.task} can be done; reassigning it."
    )


def _per_test(case: Escalated, parts: list[dict[str, Any]]) -> Steer:
    why = f"{case.task} did not land on {len(parts)} failing tests of one class: one task per test."
    return Steer("split_task", {"task": case.task, "into": parts}, why=why)


def split_by_file(case: Escalated) -> list[dict[str, Any]]:
    """One part per test file the task's pytest check runs (its test ids grouped by file), each with
    the task's claims shared; [] when the check is not pytest or runs one file."""
    command, tests = _pytest_words(case.verify)
    files: dict[str, list[str]] = {}
    for test in tests:
        files.setdefault(test.split("::", 1)[0], []).append(test)
    return _parts(case, command, files, "files")


def split_by_class(case: Escalated) -> list[dict[str, Any]]:
    """For a pytest check of one test file: one part per test class of the failing tests the task
    lists there (a file's classes test different things, which different bugs may break; its
    module-level tests are one more part), each running those of them the check runs; [] when the
    check runs more than one file or they are in one class. The task itself stays, after its parts."""
    command, tests = _pytest_words(case.verify)
    if len({test.split("::", 1)[0] for test in tests}) != 1:
        return []
    groups: dict[str, list[str]] = {}
    for test in case.listed:
        if any(test == t or test.startswith(f"{t}::") for t in tests):
            parts = test.split("::")
            where = "::".join(parts[:-1]) if len(parts) > 2 else f"the module-level tests of {parts[0]}"
            groups.setdefault(where, []).append(test)
    return _parts(case, command, groups, "test classes")


def split_by_test(case: Escalated) -> list[dict[str, Any]]:
    """For a pytest check of one test class (or of one file's module-level tests): one part per failing
    test the task lists there that the check runs, at most `MAX_PARTS` (the tests shared out in turn
    beyond that); [] for one test. Tests of one class may each run into another of several bugs in the
    code they share (cachetools' `TLRUCache`, seed 26: three bugs, seven failing tests, each attempt
    spent its turns on the first test, which two of them break); a part whose test one bug breaks
    lands, and its merge leaves the others fewer."""
    command, tests = _pytest_words(case.verify)
    chosen = [t for t in case.listed if any(t == c or t.startswith(f"{c}::") for c in tests)]
    if len({test.rsplit("::", 1)[0] for test in chosen}) != 1:  # one class, or one file's functions
        return []
    shares = [chosen[n::MAX_PARTS] for n in range(min(len(chosen), MAX_PARTS))]
    groups = {share[0] + (f" and {len(share) - 1} more" if len(share) > 1 else ""): share for share in shares}
    return _parts(case, command, groups, "tests")


def _pytest_words(verify: str) -> tuple[list[str], list[str]]:
    """A pytest command's words but its test paths, and the test paths (files or ids); ([], [])
    when it is not pytest."""
    try:
        words = shlex.split(verify)
    except ValueError:
        return [], []
    if "pytest" not in verify:
        return [], []
    is_test = [not w.startswith("-") and (w.endswith(".py") or ".py::" in w) for w in words]
    return [w for w, t in zip(words, is_test, strict=True) if not t], [
        w for w, t in zip(words, is_test, strict=True) if t
    ]


def _parts(
    case: Escalated, command: list[str], groups: dict[str, list[str]], kind: str
) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{case.task}-{n}",
            "title": f"Part of {case.task}: make {where} pass",
            "description": (
                f"The lead split {case.task}: its attempts did not land with the tests of "
                f"{len(groups)} {kind} failing. This part: {where}. Fix the code; do not "
                "change the tests."
            ),
            "verify": shlex.join([*command, *tests]),
            "claims": list(case.claims),
            "allow_shared_claims": True,
        }
        for n, (where, tests) in enumerate(groups.items(), start=1)
    ]
