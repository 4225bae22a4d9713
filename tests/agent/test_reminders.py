"""The reminder policy: its checklist, each sign that triggers it, its spacing — driven directly with
the loop's own objects — and, end to end, an agent that would claim done untested runs the check."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import AgentResult, Inject, LoopState, TurnLimit
from hilbert.agent.reminders import Reminders, acceptance_items, checklist
from hilbert.agent.tools import ToolBox, ToolOutcome
from hilbert.commands import Runner, command_env
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.sim.engineer.desk import Brief, Desk, is_reminder
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer

VERIFY = "python -m pytest -q tests/test_dates.py"
EDIT = ToolCall("c1", "edit_file", {"path": "src/dates.py", "old": "a", "new": "b"})
EDITED = ToolOutcome("edited src/dates.py")
NOT_FOUND = ToolOutcome("edit_file: `old` not found in src/dates.py", True)
PASSED = ToolOutcome("[exit 0]\n3 passed in 0.01s\n")
FAILED = ToolOutcome("[exit 1]\nF..\n1 failed, 2 passed in 0.02s\n")
READ = ToolCall("c3", "read_file", {"path": "src/dates.py"})


def shell(command: str) -> ToolCall:
    return ToolCall("c2", "shell", {"command": command})


def state(turns: int) -> LoopState:
    return LoopState("r", "Ada", "fix dates", [], turns=turns)


class Agent:
    """Plays turns against a policy the way the loop calls it: the hook before each model call, then
    the hook after each tool call of that turn. Records at which turns a reminder went out."""

    def __init__(self, policy: Reminders) -> None:
        self.policy, self.turns, self.reminded = policy, 0, list[int]()

    def turn(self, *calls: tuple[ToolCall, ToolOutcome]) -> None:
        actions = self.policy.before_model_call(state(self.turns))
        if actions:
            assert [type(a) for a in actions] == [Inject]
            self.reminded.append(self.turns)
        self.turns += 1
        for call, outcome in calls:
            assert not self.policy.after_tool_call(state(self.turns), call, outcome)

    def turns_of(self, count: int, *calls: tuple[ToolCall, ToolOutcome]) -> None:
        for _ in range(count):
            self.turn(*calls)


def quiet(**options: Any) -> Reminders:
    """A policy with every sign off but those given."""
    off: dict[str, Any] = {"every_k_turns": 0, "no_verify_turns": 0, "failing_edits": 0, "pause_s": 0}
    return Reminders(VERIFY, acceptance_items("", VERIFY), **{**off, **options})


def test_acceptance_items_come_from_the_description_with_the_verify_command_first() -> None:
    description = """Dates are parsed off by one.

- [ ] `parse_date("2024-01-31")` returns January 31
- [x] the docstring says which formats are accepted
* unrelated bullet, ignored because there is a checklist

```
- [ ] not an item: inside a code fence
```"""
    assert acceptance_items(description, VERIFY) == [
        f"`{VERIFY}` passes",
        '`parse_date("2024-01-31")` returns January 31',
        "the docstring says which formats are accepted",
    ]
    bullets = "Steps:\n1. handle leap years\n  - keep the API\n- handle leap years\n"
    assert acceptance_items(bullets, VERIFY) == [f"`{VERIFY}` passes", "handle leap years", "keep the API"]
    assert acceptance_items("No list here.", VERIFY) == [f"`{VERIFY}` passes"]


def test_the_checklist_is_short_stable_and_read_as_a_reminder_to_run_the_verify_command() -> None:
    items = acceptance_items("\n".join(f"- [ ] item {n}" for n in range(20)), VERIFY)
    text = checklist("a pause of 301 s since the last model call", VERIFY, items)
    lines = text.splitlines()
    assert lines[0] == "Reminder (why: a pause of 301 s since the last model call)"
    assert len(lines) <= 12 and all(line.startswith("- [ ] ") for line in lines[1:])
    assert lines[1] == f"- [ ] `{VERIFY}` passes"
    assert lines[-4:] == [
        "- [ ] Read the code before you guess.",
        f"- [ ] Run `{VERIFY}` yourself before you call finish.",
        "- [ ] Do not edit, skip or delete existing tests or the test configuration.",
        "- [ ] Keep to the task.",
    ]
    assert checklist("other", VERIFY, items).splitlines()[1:] == lines[1:]  # only the reason varies
    # the simulated engineer takes it for a reminder, and would run exactly the verify command
    assert is_reminder(text) and is_reminder(text, in_tool_output=True)
    assert Desk(Brief.from_task("Fix the dates (`make check`).", (text,))).verify_due == VERIFY


def test_a_long_verify_command_is_restated_whole_and_a_test_id_is_not_taken_for_a_command() -> None:
    """A verify naming many tests passed the items' 160 characters: it was cut inside its quotes, and
    the simulated engineer ran the next quoted text, a test's id, as a command (exit 127)."""
    tests = [f"tests/test_func.py::MRUDecoratorTest::test_decorator_{n}" for n in range(6)]
    verify = "python -m pytest -q " + " ".join(tests)
    items = [*acceptance_items("", verify), *(f"`{test}`" for test in tests)]
    text = checklist("the regular reminder", verify, items)
    assert text.splitlines()[1] == f"- [ ] `{verify}` passes", text
    assert Desk(Brief.from_task("Fix it.", (text,))).verify_due == verify
    cut = f"- [ ] `{verify[:150]}…\n- [ ] `{tests[0]}`\n- [ ] Run `{verify}` yourself."
    assert Desk(Brief.from_task("Fix it.", ("Reminder\n" + cut,))).verify_due == verify


def test_a_reminder_every_k_turns_counted_from_the_last_one() -> None:
    agent = Agent(quiet(every_k_turns=4))
    agent.turns_of(13, (READ, ToolOutcome("1\tdef parse_date(text):")))
    assert agent.reminded == [4, 8, 12]
    assert agent.policy.sent == ["the regular reminder, every 4 turns"] * 3


def test_turns_after_an_edit_without_running_the_verify_command_bring_a_reminder() -> None:
    agent = Agent(quiet(no_verify_turns=8))
    agent.turns_of(3, (READ, ToolOutcome("…")))  # reading only: nothing to verify yet
    agent.turn((EDIT, EDITED))  # the first unverified edit, in the 4th model call's reply
    agent.turns_of(8, (EDIT, EDITED))
    assert agent.reminded == []
    agent.turn()  # 8 model calls since then: a reminder before the next one
    assert agent.reminded == [12]
    assert agent.policy.sent == ["8 turns since your first edit without running the verify command"]
    agent.turns_of(8)
    assert agent.reminded == [12, 20]  # still not run: again after as many turns

    diligent = Agent(quiet(no_verify_turns=8))
    for _ in range(5):  # edits, each checked within a few turns by a command that contains VERIFY
        diligent.turns_of(3, (EDIT, EDITED))
        diligent.turn((shell(f"cd . &&  {VERIFY} -x"), FAILED))
    assert diligent.reminded == [] and diligent.turns == 20


def test_repeated_failing_edits_bring_a_reminder() -> None:
    agent = Agent(quiet(failing_edits=3))
    agent.turn((EDIT, NOT_FOUND), (EDIT, NOT_FOUND))
    agent.turn((EDIT, EDITED))  # a success in between: the count starts again
    agent.turn((EDIT, NOT_FOUND))
    agent.turn((EDIT, NOT_FOUND))
    agent.turn()
    assert agent.reminded == []
    agent.turn((EDIT, NOT_FOUND))
    agent.turn()
    assert agent.reminded == [6]
    assert agent.policy.sent == ["3 edits in a row failed"]

    tests_fail = Agent(quiet(failing_edits=3))
    tests_fail.turn((EDIT, EDITED), (shell(VERIFY), FAILED))
    tests_fail.turn((EDIT, EDITED), (shell("python -m pytest -q -x tests/test_x.py::test_a"), FAILED))
    tests_fail.turn((shell(VERIFY), FAILED))  # no edit since the last run: not counted
    tests_fail.turn((EDIT, EDITED), (shell(VERIFY), PASSED))  # a passing run: the count starts again
    tests_fail.turns_of(2, (EDIT, EDITED), (shell(VERIFY), FAILED))
    tests_fail.turn()
    assert tests_fail.reminded == []
    tests_fail.turn((EDIT, EDITED), (shell("npm test"), ToolOutcome("[timed out after 120s]\n", True)))
    tests_fail.turn()
    assert tests_fail.reminded == [8]
    assert tests_fail.policy.sent == ["3 edits in a row were followed by failing tests"]


def test_a_long_pause_between_model_calls_brings_a_reminder() -> None:
    now = [1000.0]
    agent = Agent(quiet(pause_s=300, clock=lambda: now[0]))
    for gap in (5, 299, 10, 301, 5, 5, 1000):
        now[0] += gap
        agent.turn()
    assert agent.reminded == [3, 6]
    assert agent.policy.sent == [
        "a pause of 301 s since the last model call",
        "a pause of 1000 s since the last model call",
    ]


def test_reminders_are_spaced_and_signs_found_meanwhile_wait() -> None:
    agent = Agent(quiet(failing_edits=2))
    agent.turns_of(8, (EDIT, NOT_FOUND), (EDIT, NOT_FOUND))  # the sign shows on every turn
    assert agent.reminded == [2, 4, 6]  # never two turns in a row

    now = [0.0]
    waiting = Agent(quiet(failing_edits=2, pause_s=300, clock=lambda: now[0], spacing=3))
    waiting.turns_of(2)
    waiting.turn((EDIT, NOT_FOUND), (EDIT, NOT_FOUND))
    waiting.turn()  # reminded of the failed edits
    now[0] += 400  # a pause right after a reminder: reported at the next allowed turn, with the other sign
    waiting.turn((EDIT, NOT_FOUND), (EDIT, NOT_FOUND))
    waiting.turns_of(2)
    assert waiting.reminded == [3, 6]
    assert waiting.policy.sent == [
        "2 edits in a row failed",
        "2 edits in a row failed; a pause of 400 s since the last model call",
    ]


def test_an_early_stopper_runs_the_verify_command_when_reminded(tmp_path: Path) -> None:
    """The engineer with `stop_early` reads the code and claims a fix without testing it; with the
    reminder policy in the loop, it runs the verify command after the reminder and really fixes it."""
    env = {**command_env(hilbert_python_first=True), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    def attempt(name: str, reminders: Reminders | None) -> tuple[AgentResult, EventStore]:
        project = generate_sample_project(tmp_path / name, seed=7, bugs=1)
        store = EventStore.open(tmp_path / f"{name}.db")
        with FakeServer("engineer:stop_early=1", seed=7) as server:
            model = make_model(f"anthropic:fake@{server.base_url}", env={})
            result = asyncio.run(
                run_agent(
                    run="r",
                    agent="Ada",
                    task=project.task,
                    model=model,
                    toolbox=ToolBox(project.path, runner=Runner.unsandboxed(env)),
                    store=store,
                    policies=[TurnLimit(80), *([reminders] if reminders else [])],
                )
            )
        return result, store

    def suite_passes(root: Path) -> bool:
        run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        return subprocess.run(run, cwd=root, env=env, capture_output=True, timeout=60).returncode == 0

    verify = "python -m pytest -q"
    assert f"(`{verify}`)" in generate_sample_project(tmp_path / "peek", seed=7, bugs=1).task
    unreminded, store = attempt("alone", None)
    shells = [e for e in store.events(run="r", kinds=["tool_result"]) if e.data["name"] == "shell"]
    assert unreminded.status == "finished" and "Fixed" in unreminded.claim
    assert len(shells) == 1 and not suite_passes(tmp_path / "alone")  # tested once at the start, never after

    reminders = Reminders(verify, acceptance_items("", verify), every_k_turns=3)
    reminded, store = attempt("reminded", reminders)
    events = store.events(run="r", kinds=["message_injected", "tool_result"])
    first = next(i for i, e in enumerate(events) if e.kind == "message_injected")
    assert events[first].data["by"] == "reminders"
    later_shell = next(e for e in events[first:] if e.kind == "tool_result" and e.data["name"] == "shell")
    assert later_shell.data["arguments"]["command"] == verify
    assert reminded.status == "finished" and suite_passes(tmp_path / "reminded"), reminded.claim
    text = store.get_messages([events[first].data["message"]])[0].content
    assert text.startswith("Reminder (why: the regular reminder, every 3 turns)")
    assert reminders.sent and reminders.sent[0] == "the regular reminder, every 3 turns"
