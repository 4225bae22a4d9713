"""Candidate repairs: the one-token edits an engineer who knows the usual kinds of bugs would try.

For the lines of a suspect function, every single-site rewrite an inverse mutation operator allows
(`hilbert.sim.sample.mutations`, direction "repair"), most plausible first: lines a traceback
blames, then the rest of the function in reading order, and adding a `not` last (it fits almost any
line). Rewrites that would not compile are dropped. Edits are made unique by taking in neighbouring
lines, so an exact-replacement edit tool accepts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.sim.sample.mutations import rewrites


@dataclass(frozen=True)
class Candidate:
    index: int  # 0-based line
    operator: str
    line: str  # the line after the repair


def candidates(lines: list[str], indices: Sequence[int], blamed: Sequence[int] = ()) -> list[Candidate]:
    """Repairs of the lines `indices`, most plausible first."""
    found: list[tuple[tuple[int, int], Candidate]] = []
    for index in indices:
        for order, rewrite in enumerate(rewrites(lines[index], "repair")):
            new_line = rewrite.apply(lines[index])
            adds_not = rewrite.operator == "negation" and len(new_line) > len(lines[index])
            rank = 0 if index in blamed else (2 if adds_not else 1)
            found.append(((rank, index * 100 + order), Candidate(index, rewrite.operator, new_line)))
    found.sort(key=lambda item: item[0])
    return [c for _, c in found if _compiles(lines, c)]


def _compiles(lines: list[str], candidate: Candidate) -> bool:
    changed = [*lines[: candidate.index], candidate.line, *lines[candidate.index + 1 :]]
    try:
        compile("\n".join(changed) + "\n", "<candidate>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def unique_edit(lines: list[str], index: int, new_line: str) -> tuple[str, str]:
    """(old, new) texts that replace line `index` with `new_line`, with just enough neighbouring
    lines that `old` occurs once in the file and `new` once in the edited file (so that the edit
    can be reverted by swapping them)."""
    before = "\n".join(lines)
    after = "\n".join([*lines[:index], new_line, *lines[index + 1 :]])
    start, end = index, index + 1
    while True:
        old = "\n".join(lines[start:end])
        new = "\n".join([*lines[start:index], new_line, *lines[index + 1 : end]])
        if (before.count(old) == 1 and after.count(new) == 1) or (start == 0 and end == len(lines)):
            return old, new
        start, end = max(start - 1, 0), min(end + 1, len(lines))
