"""The engineer's working memory and its basic moves (ask, read, edit, run the tests).

A step function is a generator: it yields actions, is sent their observations, and returns a value,
so steps compose with `yield from`. The `Desk` lives for one replay of the conversation only (see
`responder.py`): everything on it is rebuilt from the conversation on every request.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from hilbert.context.pinned import PINNED_MARK
from hilbert.context.tried import NEXT_LINE, TRIED, TRIED_HERE, TriedEdit
from hilbert.sim.engineer.actions import NOT_UNIQUE, Action, Edit, Observation, Read, Run, made
from hilbert.sim.engineer.reading import TestReport, numbered_page, read_pytest

if TYPE_CHECKING:
    from hilbert.sim.engineer.memory import Memory

T = TypeVar("T")
Steps = Generator[Action, Observation, T]

DEFAULT_TEST_COMMAND = "python -m pytest -q"
# which tests fail, one line each, without the warnings summary (more-itertools seed 24: a thread's
# exception in each of 100 runs of one test made the whole suite's listing 140,000 characters)
LISTING = "--tb=no -rf --disable-warnings"
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_TRIED_LINE = re.compile(r"^- (\S+): `(.*?)` -> `(.*?)`(?: after `(.*?)`)?(?: before `(.*?)`)?$", re.M)
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


@dataclass(frozen=True)
class Kept:
    """A repair kept: line `index` of `path` was `before` and is `after` (`said`: as the claim names
    it), made for the test `test_id`; `report_before`: the tests' report before it (`work.take_back`)."""

    path: str
    index: int
    before: str
    after: str
    said: str
    test_id: str
    report_before: TestReport


def is_reminder(text: str, *, in_tool_output: bool = False) -> bool:
    """A reminder: a message that says "reminder" or holds a markdown checklist item `- [ ]`. In a
    tool's output (which may quote anything) only a line that starts with "Reminder" counts."""
    return bool((_REMINDER_LINE if in_tool_output else _REMINDER).search(text))


def _names_tests(word: str, previous: str) -> bool:
    """A positional pytest argument naming a test file, folder or id (not an option or its value)."""
    takes_value = previous in ("-p", "-k", "-m", "-c", "-o", "--rootdir", "--tb", "-r")
    return not word.startswith("-") and not takes_value and (".py" in word or "/" in word or "::" in word)


def _command_in(text: str) -> str | None:
    """The first quoted command that runs tests (not a test's id, which names a test, nor a command
    cut short with `…`)."""
    return next((c for c in _BACKTICKED.findall(text) if ("test" in c or "make" in c) and _runnable(c)), None)


def _runnable(command: str) -> bool:
    return "::" not in (command.split() or [""])[0] and not command.endswith("…")


class Desk:
    """Files read so far (as lines, kept up to date with the engineer's own edits), edits made by
    cheating, repairs kept (and what each line said before), and whether a reminder asked for the
    tests to be run again. `wide_check`: whether a fix that passes a narrow test command is checked
    against the whole suite too."""

    def __init__(self, brief: Brief, *, wide_check: bool = True) -> None:
        self.brief = brief
        self.wide_check = wide_check
        self.files: dict[str, list[str]] = {}
        self.seen: dict[str, set[int]] = {}  # 0-based lines read, of files read in part
        self.unread: dict[str, int] = {}  # a file read in part -> the first line not read yet
        self.open_ended: set[str] = set()  # files read in windows whose end was not reached
        # files known in part where an edit's text was found more than once: edits there take in
        # lines around the one they change from the first try (`work._replace_line`)
        self.ambiguous: set[str] = set()
        self.cheat_edits: list[tuple[str, str, str]] = []
        self.fixes: list[str] = []
        self.originals: dict[str, dict[int, str]] = {}  # path -> 0-based line -> its text before a kept fix
        self.kept: list[Kept] = []  # since the replay began (after a cut, those before it are in the files)
        self.verify_due: str | None = None
        # the whole suite before the first edit (a narrow command: see `work._before_first_edit`)
        self.wide_before: TestReport | None = None
        self.steps = 0
        self.last_full_run = -1
        # edits an earlier attempt made and put back, as its feedback lists them, and this attempt's
        # before a cut, as the pinned state lists them
        self.tried: list[TriedEdit] = []
        self.tried_here: list[TriedEdit] = []  # of those, this attempt's
        for text in (brief.task, *brief.notes):  # an earlier attempt's, or this one's before a cut
            for header in (TRIED, TRIED_HERE):
                if header in text:
                    listed = [TriedEdit(*found) for found in _TRIED_LINE.findall(text.split(header, 1)[1])]
                    self.tried += listed
                    self.tried_here += listed if header == TRIED_HERE else []
        for note in brief.notes:
            self._notice(note)
        # the conversation was cut (its task state restated), or the engineer starts over after turns
        # it took (`recall`): the context is near its budget, so runs list failures, not tracebacks
        self.after_cut = any(PINNED_MARK in note for note in brief.notes)

    def _notice(self, text: str, *, in_tool_output: bool = False) -> None:
        if is_reminder(text, in_tool_output=in_tool_output):
            self.verify_due = _command_in(text) or self.brief.test_command

    def tried_before(self, path: str, index: int, new_line: str, *, earlier: bool = True) -> bool:
        """Whether this attempt (before a cut), or an earlier one unless not `earlier`, replaced line
        `index` of `path` (as known) with `new_line` and put it back: the same change of a line with
        the same lines around it, as far as its edit took them in."""
        tried = self.tried if earlier else self.tried_here
        if not tried:
            return False
        lines = [" ".join(line.split()) for line in self.files.get(path, [])]
        change = (path, lines[index] if index < len(lines) else None, " ".join(new_line.split()))
        for edit in tried:
            above = edit.above.split(NEXT_LINE) if edit.above else []
            below = edit.below.split(NEXT_LINE) if edit.below else []
            if (edit.path, edit.before, edit.after) != change or index < len(above):
                continue
            around = (lines[index - len(above) : index], lines[index + 1 : index + 1 + len(below)])
            if around == (above, below):
                return True
        return False

    def recall(self, memory: Memory) -> None:
        """Take in what the turns before a restart show (`memory.py`): the pages read there, with the
        edits made after them; the tries put back there (tried last, as an earlier attempt's are); the
        whole suite as it failed before the first edit."""
        for action, observation in memory.events:
            if isinstance(action, Read):
                self._take_page(action.path, action.end, observation)
            elif made(action, observation):
                self._apply(action)
        self.tried += memory.tried
        self.tried_here += memory.tried
        self.after_cut = self.after_cut or bool(memory.events or memory.tried or memory.wide_before)
        if memory.wide_before is not None:
            self.wide_before = read_pytest(memory.wide_before.text, memory.wide_before.exit_code)

    def _apply(self, edit: Edit) -> None:
        """`edit`, made in the workspace, made to the file as known too."""
        if edit.path in self.files:
            self.files[edit.path] = (
                "\n".join(self.files[edit.path]).replace(edit.old, edit.new, 1).split("\n")
            )

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
        """The whole file, read a page at a time when the tool shows only part of it."""
        lines = yield from self.read_from(path, 1)
        while lines is not None and path in self.unread:
            lines = yield from self.read_from(path, self.unread[path])
        return lines

    def read_from(self, path: str, line: int) -> Steps[list[str] | None]:
        """The file as far as it is known once the page from 1-based `line` on was read (nothing is
        read when that line is known already): lines not read yet are blank, and `unread[path]` is
        the first of them (absent once the whole file was read). None: the file cannot be read."""
        return (yield from self.read_window(path, line, None))

    def read_window(self, path: str, line: int, last: int | None) -> Steps[list[str] | None]:
        """As `read_from`, reading only lines `line`..`last` (1-based, inclusive; None: a page). A
        window that comes back whole does not say how long the file is: the lines after it count as
        not read (`open_ended`) until a read reaches the end."""
        known = self.files.get(path)
        if known is not None and (path not in self.unread or line - 1 in self.seen[path]):
            return known
        where = f" from line {line}" if line > 1 else ""
        where = f" lines {line}-{last}" if last is not None else where
        observation = yield from self.ask(
            Read(path, line if line > 1 or last else None, last, why=f"Reading {path}{where}.")
        )
        return self._take_page(path, last, observation)

    def _take_page(self, path: str, last: int | None, observation: Observation) -> list[str] | None:
        """The file as known with the page `observation` shows (a read to line `last`) taken in."""
        known = self.files.get(path)
        page = numbered_page(observation.text) if observation.ok else None
        if page is None:
            return known
        first, shown, total = page
        end = first - 1 + len(shown)
        if total is None and last is not None and end >= last:  # a full window: the file may go on
            length, open_ended = max(len(known or []), end), path in self.open_ended or known is None
        else:
            length, open_ended = total or end, False
        lines = list(known or [])[:length]
        lines += [""] * (length - len(lines))
        lines[first - 1 : end] = shown
        seen = self.seen.setdefault(path, set())
        seen.update(range(first - 1, end))
        self.files[path] = lines
        if open_ended:
            self.open_ended.add(path)
        else:
            self.open_ended.discard(path)
        gap = next((i for i in range(len(lines)) if i not in seen), len(lines) if open_ended else None)
        if gap is None:
            self.unread.pop(path, None)
            self.seen.pop(path, None)
        else:
            self.unread[path] = gap + 1
        return lines

    def edit(self, path: str, old: str, new: str, why: str) -> Steps[bool]:
        edit = Edit(path, old, new, why=why)
        observation = yield from self.ask(edit)
        if made(edit, observation):
            self._apply(edit)
            return True
        if NOT_UNIQUE.search(observation.text):
            return False  # the text is right but not unique in the file: the caller takes in more
        self.files.pop(path, None)  # what we thought the file holds is wrong: read it again
        self.seen.pop(path, None)
        self.unread.pop(path, None)
        self.open_ended.discard(path)
        return False

    def run_suite(self, command: str | None = None, why: str = "Running the tests.") -> Steps[TestReport]:
        self.verify_due = None
        observation = yield from self.ask(Run(command or self.brief.test_command, why=why))
        self.last_full_run = self.steps
        return read_pytest(observation.text, observation.exit_code)

    def run_listing(self, why: str) -> Steps[TestReport]:
        """The test command, one line per failure (pytest's `--tb=no -rf`: which tests fail, not why),
        when it is one plain pytest command; else as it is. After a fix, which tests fail is all that
        is asked, and a task's tracebacks can be thousands of characters a run."""
        command = self.brief.test_command
        if "pytest" in command and not re.search(r"[;&|<>`$]", command):
            command = f"{command} {LISTING}"
        return (yield from self.run_suite(command, why=why))

    def pytest(self, arguments: str) -> str:
        """The test command (or plain pytest, when the test command is not pytest) with more arguments,
        and without the files or test ids it names: a targeted re-run must run only what it targets."""
        command = self.brief.test_command if "pytest" in self.brief.test_command else DEFAULT_TEST_COMMAND
        words = shlex.split(command)
        kept = [w for i, w in enumerate(words) if not _names_tests(w, words[i - 1] if i else "")]
        return f"{shlex.join(kept)} {arguments}"

    @property
    def narrow(self) -> bool:
        """Whether the test command runs only the tests it names (a task's verify), so that what an
        edit breaks elsewhere does not show in it."""
        words = shlex.split(self.brief.test_command) if "pytest" in self.brief.test_command else []
        return any(_names_tests(w, words[i - 1] if i else "") for i, w in enumerate(words))

    def run_wide(self, why: str, tests: Sequence[str] = ()) -> Steps[TestReport]:
        """The whole suite (or just `tests`), one line per failure (what a narrow test command does
        not run)."""
        chosen = f" {shlex.join(tests)}" if tests else ""
        observation = yield from self.ask(Run(self.pytest(LISTING) + chosen, why=why))
        return read_pytest(observation.text, observation.exit_code)

    def run_one(self, test_id: str) -> Steps[TestReport]:
        """`test_id` alone: pass or not, and where in its file it failed (a short traceback: one line
        per frame; `--tb=line` names where the exception rose, for unittest in `unittest`)."""
        command = self.pytest(f"-x --tb=short --disable-warnings {shlex.quote(test_id)}")
        observation = yield from self.ask(Run(command, why=f"Re-running {test_id}."))
        return read_pytest(observation.text, observation.exit_code)
