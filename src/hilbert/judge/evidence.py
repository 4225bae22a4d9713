"""One step of the stop gate's evidence (`Step`): the record the gate (`hilbert.judge.gate`) writes for
each check it runs and the judge model (`hilbert.judge.verdict`) is shown.

It lives apart from both so that neither imports the other for it: the gate asks the judge, the judge
reads the gate's steps. Nothing else belongs here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step of the gate: its name, whether it passed, and what shows it (findings or output);
    `found` holds the integrity step's findings as (check, path) pairs: a path may hold ": " or a
    newline, so nothing reads paths back out of the findings' text."""

    name: str
    passed: bool
    summary: str
    findings: tuple[str, ...] = ()
    output: str = ""
    found: tuple[tuple[str, str], ...] = ()


WITHHELD = frozenset({"heldout"})
"""Steps whose output no model sees — not the worker's, not the judge's: the held-out tests' output would
hand over their inputs and expected values."""
