"""Edits an agent tried and put back: what its next attempt at the task need not try again.

An agent that searches for a fix edits a line, runs the tests, and undoes the edit when they still
fail. When it runs out of turns, its next attempt (a fresh workspace, a fresh conversation) knows only
what the harness tells it, and starts the same search from the top: with a search longer than one
attempt's turns, no attempt gets past where the first stopped. `tried_edits(messages)` reads, from the
agent's whole history (every turn, including those a compaction dropped), the `edit_file` changes it
later reversed; `tried_note(edits)` is the paragraph the harness adds to the next attempt's feedback.
Within an attempt, a compaction that drops the turns of a search loses it the same way: the pinned
state restated after every cut lists them too (`hilbert.context.pinned`, under `TRIED_HERE`).

A change is read by its first changed line, with runs of whitespace made one space, and the lines the
edit took in around it to find its text once (kept to tell apart two equal lines: a duplicated
`elif argc == 2:`); its reversal may take in other neighbours and is still its reversal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.models.types import Message

TRIED = (
    "Edits an earlier attempt made and then undid (its own record, information only: with each alone the"
    " tests it ran did not pass; trying one again alone is unlikely to help):"
)
TRIED_HERE = (
    "Edits you made and then undid in this attempt, in turns compacted away or not (information only:"
    " with each alone the tests you ran did not pass):"
)
MAX_TRIED = 60  # the latest ones listed
MAX_NOTE_CHARS = 6_000  # the whole note: the oldest edits are left out first
CONTEXT_LINES = 2  # of the lines an edit took in around its change, the nearest on each side
MAX_LINE_CHARS = 200


NEXT_LINE = " ⏎ "  # between the lines of the context of an edit, in its one line


@dataclass(frozen=True)
class TriedEdit:
    path: str
    before: str  # the first line the edit changed, as it was (whitespace collapsed)
    after: str  # ... and as the edit made it
    above: str = ""  # the nearest lines the edit's text held above it, as they were (NEXT_LINE between)
    below: str = ""  # ... and below it

    def line(self) -> str:
        where = f" after `{self.above}`" if self.above else ""
        where += f" before `{self.below}`" if self.below else ""
        return f"- {self.path}: `{self.before}` -> `{self.after}`{where}"

    def same_change(self, other: TriedEdit) -> bool:
        return (self.path, self.before, self.after) == (other.path, other.before, other.after)

    def undoes(self, other: TriedEdit) -> bool:
        return (self.path, self.before, self.after) == (other.path, other.after, other.before)


def tried_edits(messages: Sequence[Message]) -> list[TriedEdit]:
    """The agent's successful `edit_file` changes that a later edit reversed, in the order they were
    reversed (each once)."""
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.is_error}
    made: list[TriedEdit] = []  # in place, oldest first
    undone: list[TriedEdit] = []
    for message in messages:
        for call in message.tool_calls:
            path, old, new = (call.arguments.get(key) for key in ("path", "old", "new"))
            if call.name != "edit_file" or call.id in failed:
                continue
            if not (isinstance(path, str) and isinstance(old, str) and isinstance(new, str)):
                continue
            edit = first_change(path, old, new)
            reversed_ = next((made_ for made_ in reversed(made) if edit.undoes(made_)), None)
            if reversed_ is None:
                made.append(edit)
                undone = [e for e in undone if not e.same_change(edit)]  # made again: not given up
                continue
            made.remove(reversed_)
            if reversed_ not in undone:
                undone.append(reversed_)
    return undone


def tried_note(edits: Sequence[TriedEdit], header: str = TRIED, max_chars: int = MAX_NOTE_CHARS) -> str:
    """The paragraph for the next attempt, or under another `header` ("" when nothing was tried and
    put back)."""
    if not edits:
        return ""
    lines: list[str] = []
    for edit in reversed(edits[-MAX_TRIED:]):  # the latest first, while they fit
        line = edit.line()
        if "`" in "".join((edit.before, edit.after, edit.above, edit.below)):
            continue  # code with a backtick cannot be quoted in this line's form
        if len(header) + sum(len(x) + 1 for x in lines) + len(line) > max_chars:
            break
        lines.insert(0, line)
    more = f"\n(and {len(edits) - len(lines)} more not listed)" if len(edits) > len(lines) else ""
    return "\n".join([header, *lines]) + more if lines else ""


def first_change(path: str, old: str, new: str) -> TriedEdit:
    """An `edit_file` change read by its first changed line (the module's docstring says how)."""
    before, after = old.split("\n"), new.split("\n")
    if len(before) == len(after):
        first = next((i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a), None)
        if first is not None:
            above = NEXT_LINE.join(_flat(line) for line in before[max(first - CONTEXT_LINES, 0) : first])
            below = NEXT_LINE.join(_flat(line) for line in before[first + 1 : first + 1 + CONTEXT_LINES])
            return TriedEdit(path, _flat(before[first]), _flat(after[first]), above, below)
    return TriedEdit(path, _flat(old), _flat(new))


def _flat(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE_CHARS else flat[: MAX_LINE_CHARS - 1] + "…"
