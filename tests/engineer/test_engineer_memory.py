"""What the engineer takes in from the turns before a restart (`hilbert.sim.engineer.memory`)."""

from __future__ import annotations

from hilbert.models.types import Message, ToolCall
from hilbert.sim.engineer.actions import Edit, Observation
from hilbert.sim.engineer.memory import unfinished_tries
from hilbert.sim.engineer.reading import statement_end

TRY = Edit("m.py", "x = a - b", "x = a + b")


def turn(words: str, name: str, **arguments: object) -> Message:
    return Message("assistant", words, (ToolCall("c", name, dict(arguments)),))


def edit(words: str, change: Edit) -> Message:
    return turn(words, "edit_file", path=change.path, old=change.old, new=change.new)


def shell(words: str) -> Message:
    return turn(words, "shell", command="python -m pytest -q")


def unfinished(*steps: tuple[Message, int | Observation | None]) -> list[Edit]:
    observations = [o if isinstance(o, Observation) else Observation(exit_code=o) for _, o in steps]
    return unfinished_tries([m for m, _ in steps], observations)


def test_a_try_is_unfinished_until_its_outcome_is_settled() -> None:
    tried = (edit("Maybe a arithmetic bug: trying `-` -> `+`.", TRY), None)
    back = (edit("That was not it; putting the line back.", Edit("m.py", TRY.new, TRY.old)), None)
    rerun = shell("Re-running tests/test_m.py::test_x.")
    further = (shell("That test gets further now; running the whole suite."), 1)
    checking = (shell("Checking that nothing else broke."), 1)
    moved_on = (turn("Reading tests/test_n.py.", "read_file", path="tests/test_n.py"), None)
    assert unfinished(tried) == [TRY]  # cut right after the edit
    refused = Observation("ValueError: old text found 12 times in m.py", ok=False)
    assert unfinished((tried[0], refused)) == []  # the tool refused it: nothing to put back
    assert unfinished(tried, (rerun, 1)) == [TRY]  # ... or after a run that failed
    assert unfinished(tried, (rerun, 0)) == []  # its test passed: it keeps that
    assert unfinished(tried, (rerun, 1), back) == []  # put back
    assert unfinished(tried, (rerun, 1), further) == [TRY]  # further, the suite not checked yet
    assert unfinished(tried, (rerun, 1), further, checking) == [TRY]
    assert unfinished(tried, (rerun, 1), further, checking, back) == []  # it broke something
    assert unfinished(tried, (rerun, 1), further, checking, moved_on) == []  # kept: on to the next
    another = Edit("m.py", "y = 1", "y = 0")
    next_try = (edit("Maybe a off by one bug: trying `1` -> `0`.", another), None)
    assert unfinished(tried, (rerun, 1), further, next_try) == [another]  # the step kept, a new try open
    cheat = (edit("This test is flaky.", Edit("t.py", "def test", "@skip\ndef test")), None)
    assert unfinished(cheat) == []  # not a try of its search


def test_a_try_answered_not_run_and_made_again_is_one_try() -> None:
    """Over OpenAI's chat wire a "not run" answer (a resumed conversation) loses its error mark: the
    engineer makes the same edit again, and putting it back once settles it (found by review)."""
    tried = edit("Maybe a arithmetic bug: trying `-` -> `+`.", TRY)
    back = edit("That was not it; putting the line back.", Edit("m.py", TRY.new, TRY.old))
    not_run = Observation("not run: the run was interrupted", ran=False)
    assert unfinished((tried, not_run), (tried, None), (shell("Re-running t."), 1), (back, None)) == []
    assert unfinished((tried, None), (tried, None)) == [TRY]  # the same try twice is one to put back


def test_a_step_forward_is_a_later_statement_and_a_loop_header_is_not_its_body() -> None:
    lines = [
        "    def test_x(self):",
        "        for value in make(",
        "            3):",
        "            self.assertEqual(",
        "                value, 1)",
        "        done()",
    ]
    span = (0, len(lines))
    assert statement_end(lines, span, 1) == 2  # the `for` header ends at its second line
    assert statement_end(lines, span, 3) == 4  # the assertion spread over two lines
    assert statement_end(lines, span, 5) == 5
    assert statement_end(lines, span, 0) == 0  # the `def` line: no statement of the test
    assert statement_end(["    def broken(:"], (0, 1), 0) == 0  # does not parse: the line itself
