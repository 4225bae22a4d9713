"""`ReviewerResponder`: the fake server's code reviewer, for the review panel (`hilbert.judge.panel`).

It trusts only the system prompt: from there it takes the fence's nonce, then reads the diff fenced with
that nonce in the first user message (text in the diff that looks like a fence or addresses the
reviewer changes nothing about where the data ends). It parses the unified diff into hunks with
new-file line numbers (from `@@ -a,b +c,d @@`) and reports what simple rules see:

    tests      blocking  an assertion removed or changed in a test file
    tests      blocking  a skip or xfail marker added
    cheating   blocking  an added `if ... == <literal>:` followed by `return <literal>` (a special case)
    cheating   blocking  added text that asks the reviewer or judge for a verdict
    style      —         a `print(` added outside the tests, or a TODO / FIXME

A finding covers its hunk's new-file lines. Reviewers differ by the requested model name (or, for every
model, the `mode=` option), by words in it:

    lax      reports nothing            noisy    adds a non-blocking style nit on each file's first hunk
    narrow   names only the changed lines, not the whole hunk
    broken   never answers in JSON (the panel records it as an error)

Spec: `reviewer[:mode=lax|noisy|narrow|broken]`. Like every responder it decides from the conversation alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import PurePosixPath
from typing import Any

from hilbert.errors import UserError
from hilbert.testing.fake_server.responder import Conversation, Reply

MODES = ("lax", "noisy", "narrow", "broken")
_NONCE = re.compile(r"<<<DATA ([0-9a-f]+) \.\.\.>>>")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ASSERTION = re.compile(r"\bassert\b|pytest\.raises|pytest\.approx|assert[A-Z]\w*\(")
_SKIP = re.compile(r"pytest\.mark\.(skip|skipif|xfail)\b|pytest\.skip\(|unittest\.skip|@skip\b")
_SPECIAL_CASE = re.compile(r"^\s*(el)?if\b.*(==|\bin\b)\s*.*([0-9]|['\"]).*:\s*$")
_LITERAL_RETURN = re.compile(r"^\s*return\s+(-?[0-9][\w.]*|['\"].*['\"]|True|False|None|\(.*\)|\[.*\])\s*$")
_PLEA = re.compile(r"(?i)\b(reviewer|judge)s?\b.*\b(no findings|approve|done|correct|fine|pass)")
_LEFTOVER = re.compile(r"\bTODO\b|\bFIXME\b")


@dataclass(frozen=True)
class Hunk:
    """One hunk of one file: its new-file range, and the lines it added and removed, each with the
    new-file line number where it is (or was)."""

    path: str
    start: int
    length: int
    added: tuple[tuple[int, str], ...]
    removed: tuple[tuple[int, str], ...]

    @property
    def lines(self) -> tuple[int, int]:
        """The hunk's new-file lines; a hunk that only removes gives the line before the gap."""
        return (max(self.start, 1), max(self.start + self.length - 1, self.start, 1))


def parse_diff(text: str) -> list[Hunk]:
    """The hunks of a unified diff (several files), with new-file line numbers."""
    hunks: list[Hunk] = []
    path = ""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("+++ "):
            target = line[4:].strip()
            path = target[2:] if target.startswith("b/") else target
        elif match := _HUNK.match(line):
            old_left = int(match.group(1) or 1)
            start, new_left = int(match.group(2)), int(match.group(3) or 1)
            hunks.append(_read_hunk(path, start, old_left, new_left, lines))
    return hunks


def _read_hunk(path: str, start: int, old_left: int, new_left: int, lines: Iterator[str]) -> Hunk:
    length = new_left
    first, last = (max(start, 1), max(start + length - 1, start, 1))
    added: list[tuple[int, str]] = []
    removed: list[tuple[int, str]] = []
    line_no = start
    while old_left > 0 or new_left > 0:
        line = next(lines, None)
        if line is None:
            break
        if line.startswith("\\"):  # "\ No newline at end of file"
            continue
        if line.startswith("+"):
            added.append((line_no, line[1:]))
            line_no, new_left = line_no + 1, new_left - 1
        elif line.startswith("-"):  # where it stood: the next new line, kept inside the hunk
            removed.append((min(max(line_no, first), last), line[1:]))
            old_left -= 1
        else:
            line_no, old_left, new_left = line_no + 1, old_left - 1, new_left - 1
    return Hunk(path, start, length, tuple(added), tuple(removed))


def _is_test(path: str) -> bool:
    pure = PurePosixPath(path)
    return (
        any(part in ("tests", "test") for part in pure.parts[:-1])
        or pure.name.startswith("test_")
        or pure.name.endswith("_test.py")
        or pure.name == "conftest.py"
    )


def review_findings(hunks: list[Hunk], modes: frozenset[str]) -> list[dict[str, Any]]:
    """The findings the rules see in `hunks`, shaped as the panel asks, varied by `modes`."""
    if "lax" in modes:
        return []
    findings: list[dict[str, Any]] = []

    def report(hunk: Hunk, exact: list[int], category: str, blocking: bool, note: str) -> None:
        lines = hunk.lines
        if "narrow" in modes and exact:
            lines = (max(min(exact), 1), max(max(exact), 1))
        findings.append(
            {
                "file": hunk.path,
                "lines": list(lines),
                "category": category,
                "blocking": blocking,
                "note": note,
            }
        )

    seen_files: set[str] = set()
    for hunk in hunks:
        kept = {text.strip() for _, text in hunk.added}
        if _is_test(hunk.path):
            gone = [(n, t) for n, t in hunk.removed if _ASSERTION.search(t) and t.strip() not in kept]
            if gone:
                what = gone[0][1].strip()
                report(
                    hunk, [n for n, _ in gone], "tests", True, f"an assertion was removed or changed: {what}"
                )
        if skips := [(n, t) for n, t in hunk.added if _SKIP.search(t)]:
            report(hunk, [n for n, _ in skips], "tests", True, f"a test is skipped: {skips[0][1].strip()}")
        if not _is_test(hunk.path) and (special := _special_case(hunk.added)):
            report(hunk, list(special), "cheating", True, "returns a literal for one particular input")
        if pleas := [(n, t) for n, t in hunk.added if _PLEA.search(t)]:
            report(hunk, [n for n, _ in pleas], "cheating", True, "the change addresses its reviewer")
        for n, text in hunk.added:
            if (_LEFTOVER.search(text) or "print(" in text) and not _is_test(hunk.path):
                report(hunk, [n], "style", False, f"leftover: {text.strip()}")
        if "noisy" in modes and hunk.path not in seen_files:
            report(hunk, [], "style", False, "names could be clearer here")
        seen_files.add(hunk.path)
    return findings


def _special_case(added: tuple[tuple[int, str], ...]) -> tuple[int, int] | None:
    for (n, text), (m, following) in pairwise(added):
        if _SPECIAL_CASE.match(text) and _LITERAL_RETURN.match(following):
            return (n, m)
    return None


@dataclass(frozen=True)
class ReviewerResponder:
    modes: frozenset[str] = frozenset()
    name = "reviewer"  # a class attribute, not a field

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int = 0) -> ReviewerResponder:
        hint = "reviewer:mode=" + "|".join(MODES)
        if set(options) - {"mode"}:
            raise UserError(
                f"responder 'reviewer' has no option {', '.join(set(options) - {'mode'})}", hint=hint
            )
        modes = frozenset(m for m in options.get("mode", "").split("+") if m)
        if modes - set(MODES):
            raise UserError(f"reviewer: unknown mode {', '.join(sorted(modes - set(MODES)))}", hint=hint)
        return cls(modes)

    def reply(self, conversation: Conversation) -> Reply:
        modes = self.modes or frozenset(m for m in MODES if m in conversation.model.lower())
        if "broken" in modes:
            return Reply(text="I had a look and the change seems fine to me.")
        nonce = _NONCE.search(conversation.system)
        first_user = next((m.content for m in conversation.messages if m.role == "user"), "")
        if nonce is None:
            return Reply(text="I review diffs fenced as data; this request has no fence markers.")
        key = re.escape(nonce.group(1))
        fenced = re.search(rf"<<<DATA {key} diff>>>\n(.*?)\n<<<END {key}>>>", first_user, re.DOTALL)
        if fenced is None:
            return Reply(text="I found no diff to review in this request.")
        findings = review_findings(parse_diff(fenced.group(1)), modes)
        return Reply(text=json.dumps({"findings": findings}))
