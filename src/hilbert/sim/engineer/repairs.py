"""Candidate repairs: the one-token edits an engineer who knows the usual kinds of bugs would try.

For the lines of a suspect function, every single-site rewrite an inverse mutation operator allows
(`hilbert.sim.sample.mutations`, direction "repair"), most plausible first: lines a traceback
blames, then the rest of the function that raised, then the other lines in reading order, and adding a
`not` last (it fits almost any line). Rewrites that would not compile are dropped. Edits are made
unique by taking in neighbouring lines, so an exact-replacement edit tool accepts them.
"""

from __future__ import annotations

import functools
import io
import re
import textwrap
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hilbert.sim.sample.mutations import rewrites


@dataclass(frozen=True)
class Candidate:
    index: int  # 0-based line
    operator: str
    line: str  # the line after the repair
    blamed: bool = False  # on a line a traceback blames, or a condition that led to it
    adds_not: bool = False  # puts a `not` before the line: it fits almost any condition


def candidates(
    lines: list[str],
    indices: Sequence[int],
    blamed: Sequence[int] = (),
    originals: Mapping[int, str] | None = None,
    known: set[int] | None = None,
) -> list[Candidate]:
    """Repairs of the lines `indices`, most plausible first. `originals`: the text some lines had
    before a fix of the engineer's own: that fix may have been the wrong one of two that passed the
    test it was made for, so the other repairs of the line as it was come after the line's own.
    `known`: of a file read in part, the lines read (the others are blank)."""
    found: list[tuple[tuple[int, int], Candidate]] = []
    prose = _inside_strings(lines, known)
    near = _raising_functions(lines, blamed)
    guards = guards_of(lines, blamed)
    for index in indices:
        if index in prose:
            continue
        texts = [lines[index]]
        if originals and index in originals:
            texts.append(originals[index])
        order, made = 0, {lines[index], *texts}
        for text in texts:
            for rewrite in rewrites(text, "repair"):
                new_line = rewrite.apply(text)
                if new_line in made:
                    continue
                made.add(new_line)
                adds_not = rewrite.operator == "negation" and len(new_line) > len(text)
                at_raise = index in blamed or index in guards
                if at_raise:  # the raise, then its guards, nearest first
                    rank, place = (1 if adds_not else 0), guards.get(index, -1)
                else:
                    rank, place = (5 if adds_not else (3 if index in near else 4)), index
                candidate = Candidate(index, rewrite.operator, new_line, at_raise, adds_not)
                found.append(((rank, place * 100 + order), candidate))
                order += 1
    found.sort(key=lambda item: item[0])
    return [c for _, c in found if _compiles(lines, c)]


def _raising_functions(lines: list[str], blamed: Sequence[int]) -> set[int]:
    """The lines of the innermost functions holding a blamed line (where the traceback shows the
    exception rose): in a long class, the method that raised is read before the others."""
    near: set[int] = set()
    for line in blamed:
        if not 0 <= line < len(lines) or (start := _enclosing(lines, line)) is None:
            continue
        indent, end = len(lines[start]) - len(lines[start].lstrip()), start + 1
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
        ):
            end += 1
        near.update(range(start + 1, end))
    return near


def guards_of(lines: list[str], blamed: Sequence[int]) -> dict[int, int]:
    """The conditions that led to a blamed line: the `if` / `elif` lines of the chain whose branch
    holds it (an exception raised in an `else:` went through every condition above it), each with
    its distance from the blamed line (the nearest is read first)."""
    found: dict[int, int] = {}
    for line in blamed:
        if not 0 <= line < len(lines) or not lines[line].strip():
            continue
        indent = _indent(lines[line])
        header = next(
            (i for i in range(line - 1, -1, -1) if lines[i].strip() and _indent(lines[i]) < indent), None
        )
        if header is None or not lines[header].lstrip().startswith(("if ", "elif ", "else:")):
            continue
        level = _indent(lines[header])
        for index in range(header, -1, -1):
            text = lines[index].strip()
            if not text or _indent(lines[index]) > level:
                continue
            if _indent(lines[index]) < level or not text.startswith(("if ", "elif ", "else:")):
                break
            if not text.startswith("else:"):
                found.setdefault(index, line - index)
            if text.startswith("if "):
                break
    return found


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _inside_strings(lines: list[str], known: set[int] | None = None) -> set[int]:
    """0-based lines inside a multi-line string (a docstring's text, its doctests): prose, not code.
    Read with `tokenize`; a file known only in part (`known`: the lines read) is read by counting
    triple quotes, a stretch of lines not read ending what was open (a docstring whose end was not
    read ends there, not at the next triple quote read)."""
    inside: set[int] = set()
    try:  # a file known in part tokenizes as if its blanks were text: a string may seem to go on
        if known is not None:
            raise tokenize.TokenError("known in part")
        for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] - 1, tok.end[0]))
        return inside
    except (tokenize.TokenError, SyntaxError):
        inside.clear()
    quote: str | None = None
    for index, line in enumerate(lines):
        if known is not None and index not in known:
            quote = None
            continue
        opened = quote
        for mark in re.findall(r'"""|\'\'\'', line):
            if quote is None:
                quote = mark
            elif mark == quote:
                quote = None
        if opened is not None or quote is not None:
            inside.add(index)
    return inside


def _compiles(lines: list[str], candidate: Candidate) -> bool:
    """Whether the file still compiles with the candidate. A file known only in part (the lines not
    read are blank) may not compile as known: then the candidate's own function must, or, when that
    is not known whole either (a docstring whose end was not read), the line alone."""
    changed = [*lines[: candidate.index], candidate.line, *lines[candidate.index + 1 :]]
    if _parses("\n".join(changed)):
        return True
    if _parses("\n".join(lines)):
        return False
    start = _enclosing(lines, candidate.index)
    if start is not None:
        end = start + 1
        indent = len(lines[start]) - len(lines[start].lstrip())
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
        ):
            end += 1
        if _parses(textwrap.dedent("\n".join(lines[start:end]))):
            return _parses(textwrap.dedent("\n".join(changed[start:end])))
    line = candidate.line.strip()  # alone, as the body of a function (it may `return`)
    return _parses(f"def _():\n    {line}" + ("\n        pass" if line.endswith(":") else ""))


def _enclosing(lines: list[str], index: int) -> int | None:
    """The 0-based line of the innermost `def` holding line `index`, if any."""
    indent = len(lines[index]) - len(lines[index].lstrip())
    for start in range(index - 1, -1, -1):
        text = lines[start]
        if text.strip() and len(text) - len(text.lstrip()) < indent:
            if text.lstrip().startswith(("def ", "async def ")):
                return start
            indent = len(text) - len(text.lstrip())
    return None


@functools.lru_cache(maxsize=256)
def _parses(source: str) -> bool:
    try:
        compile(source + "\n", "<candidate>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def unique_edit(
    lines: list[str], index: int, new_line: str, context: int = 0, seen: set[int] | None = None
) -> tuple[str, str]:
    """(old, new) texts that replace line `index` with `new_line`, with just enough neighbouring
    lines that `old` occurs once in the file and `new` once in the edited file (so that the edit
    can be reverted by swapping them), and at least `context` lines either side (for a file known
    only in part, where a text unique in what was read may not be unique in the file). `seen`: the
    lines read of a file known in part; the edit takes in no line outside the read stretch around
    `index` (its text is not known)."""
    low, high = 0, len(lines)
    if seen is not None:
        low, high = index, index + 1
        while low > 0 and low - 1 in seen:
            low -= 1
        while high < len(lines) and high in seen:
            high += 1
    before = "\n".join(lines)
    after = "\n".join([*lines[:index], new_line, *lines[index + 1 :]])
    start, end = max(index - context, low), min(index + 1 + context, high)
    while True:
        old = "\n".join(lines[start:end])
        new = "\n".join([*lines[start:index], new_line, *lines[index + 1 : end]])
        if (before.count(old) == 1 and after.count(new) == 1) or (start == low and end == high):
            return old, new
        start, end = max(start - 1, low), min(end + 1, high)
