"""What the outcomes a run at head reported say, beyond pass and fail (`Steps.assess` uses them):
pytest-xdist workers that reported nothing, the tests of the change's new test files (those collected
must run; a hook that drops them is a finding, the command's own deselection is noted), and the
tally of outcomes shown in a step's summary. Pure functions of the gathered `Outcomes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from hilbert.judge.base_runs import Reference
from hilbert.judge.change import Allowances
from hilbert.judge.testruns import Outcomes

EXIT_ONLY = (
    "exit status only: the command started no pytest, so the judge could not see which tests ran "
    "or how each came out"
)


def allowed(nodeid: str, reference: Reference, allow: Allowances) -> bool:
    return allow.allows(node_file(nodeid))  # node ids are keyed by their rootdir: a path in the tree


def node_file(nodeid: str) -> str:
    return nodeid.split("::")[0]


def unseen(workers: Sequence[str]) -> str:
    return (
        f"exit status only for {len(workers)} pytest-xdist worker(s) that reported nothing to the judge "
        f"({', '.join(w.split('@')[0] for w in workers[:5])}): the outcomes of the tests they ran could "
        "not be gathered"
    )


def new_test_findings(out: Outcomes, new_tests: Sequence[str]) -> tuple[list[str], list[str]]:
    """Findings and notes on the tests of the change's new test files: those collected must run
    (a hook that drops them, or stops them running, is a finding); those the command's own selection
    options deselect are noted, as is a new test module in the command's scope that collects nothing.
    A new file the command does not collect from is nobody's concern."""
    files = set(new_tests)
    never = [n for n in out.collected if node_file(n) in files and out.outcome(n) == "not run"]
    dropped = [n for n in out.dropped if node_file(n) in files]
    deselected = [n for n in out.deselected if node_file(n) in files]
    findings: list[str] = []
    notes: list[str] = []
    if never:
        findings.append(f"{len(never)} new test(s) collected but never run: {', '.join(never[:5])}")
    if dropped:
        findings.append(
            f"{len(dropped)} new test(s) collected and then left out of the run by a hook (not by the "
            f"command's -k, -m or --deselect): {', '.join(dropped[:5])}"
        )
    if deselected:
        notes.append(
            f"new test(s) deselected by the command's selection options: {', '.join(deselected[:5])}"
        )
    seen = {node_file(n) for n in (*out.collected, *out.dropped, *out.deselected)}
    empty = [
        f
        for f in new_tests
        if f not in seen and _test_module(f) and any(_under(f, where) for where in out.scope)
    ]
    if empty:
        notes.append(
            f"new test file(s) in the command's collection scope collect no test: {', '.join(empty[:5])}"
        )
    return findings, notes


def _test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("test_") or name.endswith("_test.py")


def _under(path: str, where: str) -> bool:
    return where == "." or path == where or path.startswith(where.rstrip("/") + "/")


def counts(outcomes: Iterable[str]) -> str:
    tally: dict[str, int] = {}
    for outcome in outcomes:
        tally[outcome] = tally.get(outcome, 0) + 1
    return ", ".join(f"{count} {outcome}" for outcome, count in sorted(tally.items()))


__all__ = ["EXIT_ONLY", "allowed", "counts", "new_test_findings", "node_file", "unseen"]
