"""Edits an agent tried and put back: what its next attempt at the task need not try again.

An agent that searches for a fix edits a line, runs the tests, and undoes the edit when they still
fail. When it runs out of turns, its next attempt (a fresh workspace, a fresh conversation) knows only
what the harness tells it, and starts the same search from the top: with a search longer than one
attempt's turns, no attempt gets past where the first stopped. `tried_edits(messages)` reads, from the
agent's whole history (every turn, including those a compaction dropped), the `edit_file` changes it
later reversed; `tried_note(edits)` is the paragraph the harness adds to the next attempt's feedback.

A change is read by its first changed line, with runs of whitespace made one space, and the lines the
edit took in around it to find its text once (kept to tell apart two equal lines: a duplicated
`elif argc == 2:`); its reversal may take in other neighbours and is still its reversal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.models.types import Message

TRIED = (
    "Edits an earlier attempt made and put back (the tests still failed with each; do not try them again):"
)
MAX_TRIED = 60  # the latest ones listed
MAX_LINE_CHARS = 200


NEXT_LINE = " ⏎ "  # between the lines of the context of an edit, in its one line


@dataclass(frozen=True)
class TriedEdit:
    path: str
    before: str  # the first line the edit changed, as it was (whitespace collapsed)
    after: str  # ... and as the edit made it
    above: str = ""  # the lines the edit's text held above it, as they were (NEXT_LINE between)
    below: str = ""  # ... and below it

    def line(self) -> str:
        where = f" after `{self.above}`" if self.above else ""
        where += f" before `{self.below}`" if self.below else ""
        return f"- {self.path}: `{self.before}` -> `{self.after}`{where}"

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
            edit = _first_change(path, old, new)
            reversed_ = next((made_ for made_ in reversed(made) if edit.undoes(made_)), None)
            if reversed_ is None:
                made.append(edit)
                continue
            made.remove(reversed_)
            if reversed_ not in undone:
                undone.append(reversed_)
    return undone


def tried_note(edits: Sequence[TriedEdit]) -> str:
    """The paragraph for the next attempt ("" when nothing was tried and put back)."""
    if not edits:
        return ""
    shown = edits[-MAX_TRIED:]
    more = f"\n(and {len(edits) - len(shown)} earlier ones)" if len(edits) > len(shown) else ""
    return "\n".join([TRIED, *(edit.line() for edit in shown)]) + more


def _first_change(path: str, old: str, new: str) -> TriedEdit:
    before, after = old.split("\n"), new.split("\n")
    if len(before) == len(after):
        first = next((i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a), None)
        if first is not None:
            above = NEXT_LINE.join(_flat(line) for line in before[:first])
            below = NEXT_LINE.join(_flat(line) for line in before[first + 1 :])
            return TriedEdit(path, _flat(before[first]), _flat(after[first]), above, below)
    return TriedEdit(path, _flat(old), _flat(new))


def _flat(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_LINE_CHARS else flat[: MAX_LINE_CHARS - 1] + "…"
