"""The engineer's working memory and its basic moves (ask, read, edit, run the tests).

A step function is a generator: it yields actions, is sent their observations, and returns a value,
so steps compose with `yield from`. The `Desk` lives for one replay of the conversation only (see
`responder.py`): everything on it is rebuilt from the conversation on every request.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Generator
from dataclasses import dataclass
from typing import TypeVar

from hilbert.sim.engineer.actions import Action, Edit, Observation, Read, Run
from hilbert.sim.engineer.reading import TestReport, numbered_lines, read_pytest

T = TypeVar("T")
Steps = Generator[Action, Observation, T]

DEFAULT_TEST_COMMAND = "python -m pytest -q"
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_REMINDER = re.compile(r"\breminders?\b|^\s*[-*] \[ \]", re.IGNORECASE | re.MULTILINE)
_REMINDER_LINE = re.compile(r"^\W*reminders?\b|^\s*[-*] \[ \]", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Brief:
    """What the engineer was asked: the task text, the test command it names, and any other
    messages that came with it."""

    task: str
    test_command: str
    notes: tuple[str, ...] = ()

    @classmethod
    def from_task(cls, task: str, notes: tuple[str, ...] = ()) -> Brief:
        return cls(task, _command_in(task) or DEFAULT_TEST_COMMAND, notes)


def is_reminder(text: str, *, in_tool_output: bool = False) -> bool:
    """A reminder: a message that says "reminder" or holds a markdown checklist item `- [ ]`. In a
    tool's output (which may quote anything) only a line that starts with "Reminder" counts."""
    return bool((_REMINDER_LINE if in_tool_output else _REMINDER).search(text))


def _names_tests(word: str, previous: str) -> bool:
    """A positional pytest argument naming a test file, folder or id (not an option or its value)."""
    takes_value = previous in ("-p", "-k", "-m", "-c", "-o", "--rootdir", "--tb", "-r")
    return not word.startswith("-") and not takes_value and (".py" in word or "/" in word or "::" in word)


def _command_in(text: str) -> str | None:
    return next((c for c in _BACKTICKED.findall(text) if "test" in c or "make" in c), None)


class Desk:
    """Files read so far (as lines, kept up to date with the engineer's own edits), edits made by
    cheating, repairs kept, and whether a reminder asked for the tests to be run again."""

    def __init__(self, brief: Brief) -> None:
        self.brief = brief
        self.files: dict[str, list[str]] = {}
        self.cheat_edits: list[tuple[str, str, str]] = []
        self.fixes: list[str] = []
        self.verify_due: str | None = None
        self.steps = 0
        self.last_full_run = -1
        for note in brief.notes:
            self._notice(note)

    def _notice(self, text: str, *, in_tool_output: bool = False) -> None:
        if is_reminder(text, in_tool_output=in_tool_output):
            self.verify_due = _command_in(text) or self.brief.test_command

    def verify_wanted(self, ignore_reminders: bool) -> bool:
        """A reminder asked to run the tests and they were not run since."""
        fresh = self.last_full_run == self.steps
        return self.verify_due is not None and not ignore_reminders and not fresh

    def ask(self, action: Action) -> Steps[Observation]:
        """`action`'s observation; asked again while the harness answers that it was not run."""
        while True:
            observation = yield action
            self.steps += 1
            self._notice(observation.text, in_tool_output=True)
            for note in observation.notes:
                self._notice(note)
            if observation.ran:
                return observation

    def read(self, path: str) -> Steps[list[str] | None]:
        if path not in self.files:
            observation = yield from self.ask(Read(path, why=f"Reading {path}."))
            lines = numbered_lines(observation.text) if observation.ok else None
            if lines is None:
                return None
            self.files[path] = lines
        return self.files[path]

    def edit(self, path: str, old: str, new: str, why: str) -> Steps[bool]:
        observation = yield from self.ask(Edit(path, old, new, why=why))
        if observation.succeeded:
            if path in self.files:
                self.files[path] = "\n".join(self.files[path]).replace(old, new, 1).split("\n")
            return True
        self.files.pop(path, None)  # what we thought the file holds is wrong: read it again
        return False

    def run_suite(self, command: str | None = None, why: str = "Running the tests.") -> Steps[TestReport]:
        self.verify_due = None
        observation = yield from self.ask(Run(command or self.brief.test_command, why=why))
        self.last_full_run = self.steps
        return read_pytest(observation.text, observation.exit_code)

    def pytest(self, arguments: str) -> str:
        """The test command (or plain pytest, when the test command is not pytest) with more arguments,
        and without the files or test ids it names: a targeted re-run must run only what it targets."""
        command = self.brief.test_command if "pytest" in self.brief.test_command else DEFAULT_TEST_COMMAND
        words = shlex.split(command)
        kept = [w for i, w in enumerate(words) if not _names_tests(w, words[i - 1] if i else "")]
        return f"{shlex.join(kept)} {arguments}"

    def run_one(self, test_id: str) -> Steps[TestReport]:
        command = self.pytest(f"-x {shlex.quote(test_id)}")
        observation = yield from self.ask(Run(command, why=f"Re-running {test_id}."))
        return read_pytest(observation.text, observation.exit_code)
