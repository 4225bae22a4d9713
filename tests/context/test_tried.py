from __future__ import annotations

from hilbert.context.tried import MAX_NOTE_CHARS, MAX_TRIED, TRIED, TriedEdit, tried_edits, tried_note
from hilbert.models.types import Message, ToolCall


def edit(call_id: str, old: str, new: str, path: str = "pkg/m.py") -> Message:
    return Message("assistant", "", (ToolCall(call_id, "edit_file", {"path": path, "old": old, "new": new}),))


def result(call_id: str, *, error: bool = False) -> Message:
    return Message("tool", "refused: not found" if error else "edited", tool_call_id=call_id, is_error=error)


def test_an_edit_reversed_later_with_other_context_is_tried_one_kept_or_refused_is_not() -> None:
    messages = [
        edit("1", "a = 1\n    b  =  2", "a = 1\n    b = 3"),  # tried: put back below with other lines
        result("1"),
        edit("2", "x = 0", "x = 9"),  # refused by the tool: never made
        result("2", error=True),
        edit("3", "b = 3\nc = 4", "b  =  2\nc = 4"),
        result("3"),
        edit("4", "d = 1", "d = 2"),  # kept
        result("4"),
    ]
    assert tried_edits(messages) == [TriedEdit("pkg/m.py", "b = 2", "b = 3", above="a = 1")]
    note = tried_note(tried_edits(messages))
    assert note == f"{TRIED}\n- pkg/m.py: `b = 2` -> `b = 3` after `a = 1`"
    assert tried_note([]) == ""


def test_the_note_lists_the_latest_tries_within_its_size_and_counts_the_rest() -> None:
    edits = [TriedEdit("m.py", f"n = {i}", f"n = {i + 1}") for i in range(MAX_TRIED + 5)]
    lines = tried_note(edits).splitlines()
    assert lines[1] == "- m.py: `n = 5` -> `n = 6`" and lines[-1] == "(and 5 more not listed)"
    assert len(lines) == MAX_TRIED + 2
    # an edit that took in a 300-line block keeps its two nearest lines on each side; the note is capped
    b = "\n".join(f"    line_{n} = {n}" for n in range(300))
    big = [edit(f"{n}", f"{b}\n    x = {n}\n{b}", f"{b}\n    x = {n + 1}\n{b}") for n in range(60)]
    undo = [edit(f"u{n}", f"    x = {n + 1}", f"    x = {n}") for n in range(60)]
    tried = tried_edits([m for pair in zip(big, undo, strict=True) for m in pair])
    assert len(tried) == 60 and tried[0].above == "line_298 = 298 ⏎ line_299 = 299", tried[0]
    assert len(tried_note(tried)) <= MAX_NOTE_CHARS + 40
    # an edit made again after it was undone (and kept) was not given up
    again = [edit("a", "y = 1", "y = 2"), edit("b", "y = 2", "y = 1"), edit("c", "y = 1", "y = 2")]
    assert tried_edits(again) == []
    assert tried_note([TriedEdit("m.py", "s = `x`", "s = `y`")]) == ""  # a backtick cannot be quoted


def test_of_two_equal_lines_the_one_tried_is_told_apart_by_the_lines_its_edit_took_in() -> None:
    from hilbert.sim.engineer.desk import Brief, Desk

    source = [
        "if n == 1:",
        "    x = 1",
        "elif n == 2:",
        "    x = 2",
        "elif n == 2:",  # the bug: should be 3
        "    x = 3",
    ]
    # the engineer's edit of line 2 took the next line in (its text alone is there twice); put back
    tried = edit("1", "elif n == 2:\n    x = 2", "elif n == 3:\n    x = 2")
    back = edit("2", "elif n == 3:\n    x = 2", "elif n == 2:\n    x = 2")
    note = tried_note(tried_edits([tried, result("1"), back, result("2")]))
    assert note.endswith("- pkg/m.py: `elif n == 2:` -> `elif n == 3:` before `x = 2`"), note
    desk = Desk(Brief.from_task(f"Fix it. Run `python -m pytest -q`.\n\n{note}"))
    desk.files["pkg/m.py"] = source
    assert desk.tried_before("pkg/m.py", 2, "elif n == 3:")
    assert not desk.tried_before("pkg/m.py", 4, "elif n == 3:")  # the same change of the other line
    assert not desk.tried_before("pkg/m.py", 2, "elif n == 1:")
