"""The pinned task state: read from the fleet's own task prompt, and in step with the stop gate."""

from __future__ import annotations

from hilbert.context.pinned import FEEDBACK_PREFIXES, MAX_TRIED_CHARS, PINNED_MARK, is_pinned, pinned_state
from hilbert.context.tried import TRIED_HERE
from hilbert.fleet.attempt import WORKER_TASK
from hilbert.fleet.stop_gate import FEEDBACK, PANEL_FEEDBACK
from hilbert.models.types import Message, ToolCall
from hilbert.security.envelope import ENVELOPE_RULES


def test_the_stop_gates_messages_are_recognised_as_judge_feedback() -> None:
    gate = FEEDBACK.format(commit="abc", reasons="- red", output="", verify="make test", restore="")
    panel = PANEL_FEEDBACK.format(commit="abc", reasons="- bad", verify="make test")
    assert [p for p in FEEDBACK_PREFIXES if gate.startswith(p) or panel.startswith(p)] == list(
        FEEDBACK_PREFIXES
    )
    messages = [Message("system", "s"), Message("user", "t"), Message("user", gate), Message("user", "hi")]
    assert [is_pinned(messages, i) for i in range(4)] == [True, True, True, False]


def test_the_pinned_state_restates_a_fleet_tasks_checks_rules_changes_and_feedback() -> None:
    task = WORKER_TASK.format(
        id="t3",
        title="Make parse() accept tabs",
        verify="pytest -q tests/test_parse.py",
        claims=" (expected: parse('a\\tb') == ['a', 'b'])",
        messages=ENVELOPE_RULES,
        description="Tabs separate fields too.\n\n- [ ] parse splits on tabs\n- [ ] the docs say so",
    )
    edit = ToolCall("e1", "edit_file", {"path": "src/parse.py", "old": "x", "new": "y"})
    failed = ToolCall("e2", "write_file", {"path": "tests/test_parse.py", "content": ""})
    feedback = FEEDBACK.format(commit="abc", reasons="- verify failed", output="", verify="v", restore="")
    messages = [
        Message("system", "s"),
        Message("user", f"Agent: Euler\n\n{task}"),
        Message("assistant", "", tool_calls=(edit, failed)),
        Message("tool", "edited", tool_call_id="e1", name="edit_file"),
        Message("tool", "refused", tool_call_id="e2", name="write_file", is_error=True),
        Message("user", feedback),
    ]
    text = pinned_state(messages).content
    assert text.startswith(PINNED_MARK)
    assert "Task t3: Make parse() accept tabs" in text
    for expected in (
        "`pytest -q tests/test_parse.py` passes",
        "parse splits on tabs",
        "the docs say so",
        "your change shows: parse('a\\tb') == ['a', 'b']",
        "Do not edit or skip tests.",
        "Run `pytest -q tests/test_parse.py` yourself before you call finish.",
        "Files you changed so far: src/parse.py\n",
        feedback,
    ):
        assert expected in text
    assert "tests/test_parse.py\n" not in text.split("Files you changed")[1].split("\n")[0]


def test_the_pinned_state_lists_the_edits_made_and_undone_so_that_a_cut_does_not_restart_a_search() -> None:
    """A search edits a line, runs the tests, and puts it back; a cut that drops those turns made the
    agent try the same edits again (the simulated engineer, compacted every few turns, never got past
    its first tries). The edits made and undone in this attempt are restated, the latest kept."""
    calls = [
        ("e1", {"path": "m.py", "old": "x = a - b", "new": "x = a + b"}),  # tried ...
        ("e2", {"path": "m.py", "old": "x = a + b", "new": "x = a - b"}),  # ... and put back
        ("e3", {"path": "m.py", "old": "y = 1", "new": "y = 0"}),  # in place: not listed
    ]
    messages = [Message("system", "s"), Message("user", "Fix m.py. Done when `pytest -q` passes.")]
    for call_id, arguments in calls:
        messages += [
            Message("assistant", "", tool_calls=(ToolCall(call_id, "edit_file", arguments),)),
            Message("tool", "edited", tool_call_id=call_id, name="edit_file"),
        ]
    text = pinned_state(messages).content
    listed = text.split(TRIED_HERE, 1)[1]
    assert "- m.py: `x = a - b` -> `x = a + b`" in listed
    assert "y = 0" not in listed
    many = [
        Message("assistant", "", tool_calls=(ToolCall(f"c{n}{k}", "edit_file", {"path": "m.py", **e}),))
        for n in range(200)
        for k, e in enumerate(
            ({"old": f"v = {n}", "new": f"v = {n + 1}"}, {"old": f"v = {n + 1}", "new": f"v = {n}"})
        )
    ]
    text = pinned_state([*messages[:2], *many]).content
    assert "`v = 199` -> `v = 200`" in text and "`v = 0` -> `v = 1`" not in text  # the latest kept
    assert len(text.split(TRIED_HERE, 1)[1]) <= MAX_TRIED_CHARS
