"""The reminder policy: a short checklist put back in front of the agent when it tends to drift.

`Reminders` injects one user message — a markdown checklist headed "Reminder (why: …)" with the task's
acceptance items and a global list (read before you guess, run the verify command, leave the tests
alone, keep to the task) — before a model call when one of these signs shows:

- every K turns: `every_k_turns` model calls since the last reminder (or the start);
- no verify: `no_verify_turns` model calls since the agent's first edit that no run of the verify
  command (or of any command containing it) has followed yet;
- failing edits: `failing_edits` edit/write calls in a row that failed, or edits each followed by
  a failing test run (a shell command that contains the verify command or looks like a test run);
- a pause: `pause_s` seconds or more of wall-clock time between two model calls (the agent, or a
  command it ran, was waiting).

Reminders are spaced: none within `spacing` model calls of the previous one (so never two turns in
a row), and a sign re-arms only after it has built up again. Signs found meanwhile wait. The text is
the same every time but for the "why" line, which prompt caching likes. The loop records each
message as a `message_injected` event by "reminders"; `sent` lists the reasons for the fleet's views.
What this module must not hold: judging a claim (the judge) or budgets (their own policies).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from hilbert.agent.policies import Action, Inject, LoopState, Policy
from hilbert.agent.tools import ToolOutcome
from hilbert.models.types import Message, ToolCall

SHELL = "shell"
EDIT_TOOLS = frozenset({"edit_file", "write_file"})
MAX_ITEMS = 6  # the verify item included: with the header and the global list, 11 lines
MAX_ITEM_CHARS = 160
GLOBAL_ITEMS = (
    "Read the code before you guess.",
    "Run `{verify}` yourself before you call finish.",
    "Do not edit, skip or delete existing tests or the test configuration.",
    "Keep to the task.",
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_CHECKLIST = re.compile(r"^\s*[-*+]\s+\[[ xX]\]\s+(.+?)\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.+?)\s*$")
_EXIT = re.compile(r"^\[exit (-?\d+)\]")
_TEST_RUN = re.compile(r"\b(?:pytest|unittest|tox|nox|jest|vitest|mocha|ctest|tests?)\b")


def acceptance_items(description: str, verify: str) -> list[str]:
    """The acceptance items of a task: "`VERIFY` passes" first, then the description's markdown
    checklist items (`- [ ] …`) or, when it has none, its bullet and numbered items (outside code
    fences), in order, without repeats."""
    checklist: list[str] = []
    bullets: list[str] = []
    fenced = False
    for line in description.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if found := _CHECKLIST.match(line):
            checklist.append(found.group(1))
        elif found := _BULLET.match(line):
            bullets.append(found.group(1))
    items = [f"`{verify}` passes"] if verify.strip() else []
    for item in checklist or bullets:
        if item not in items:
            items.append(item)
    return items


def checklist(reason: str, verify: str, items: Sequence[str]) -> str:
    """The reminder's text: a header with the reason, then one `- [ ]` line per item (the task's
    first, cut to `MAX_ITEMS`), then the global list."""
    command = f"`{verify}` passes"  # whole: a command cut short cannot be run (and its quote not closed)
    kept = [item if item == command else _clip(" ".join(item.split())) for item in items[:MAX_ITEMS]]
    general = [line.format(verify=verify) for line in GLOBAL_ITEMS]
    return "\n".join([f"Reminder (why: {reason})", *(f"- [ ] {line}" for line in [*kept, *general])])


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ITEM_CHARS else text[: MAX_ITEM_CHARS - 1] + "…"


def _words(command: str) -> str:
    return " ".join(command.split())


class Reminders(Policy):
    """Inject the task's checklist every `every_k_turns` model calls and when a sign of drift shows
    (see the module docstring). `sent` holds the reason of each reminder, in order."""

    name = "reminders"

    def __init__(
        self,
        verify: str,
        items: Sequence[str] = (),
        *,
        every_k_turns: int = 10,
        no_verify_turns: int = 8,
        failing_edits: int = 3,
        pause_s: float = 300.0,
        spacing: int = 2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`items` are the task's acceptance items (see `acceptance_items`); without them the
        checklist names only "`verify` passes". A threshold of 0 turns that sign off."""
        self.verify = _words(verify)
        self.items = list(items) or acceptance_items("", self.verify)
        self.every_k_turns, self.no_verify_turns = every_k_turns, no_verify_turns
        self.failing_edits, self.pause_s, self.spacing = failing_edits, pause_s, max(1, spacing)
        self.clock = clock
        self.sent: list[str] = []
        self.last_reminder = 0  # the turn count when the last reminder went out (0: the start)
        self.unverified_since: int | None = None  # the turn of the first edit no verify run followed
        self.failed_edits = 0  # edit/write calls in a row that failed
        self.failed_after_edit = 0  # edits in a row, each followed by a failing test run
        self.edited_since_test = False
        self.last_call_at: float | None = None
        self.paused_s: float | None = None  # a pause noticed, not yet reminded of

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        now = self.clock()
        if self.last_call_at is not None and self.pause_s and now - self.last_call_at >= self.pause_s:
            self.paused_s = max(self.paused_s or 0.0, now - self.last_call_at)
        self.last_call_at = now
        turn = state.turns
        if turn - self.last_reminder < self.spacing:
            return ()
        reasons = self._signs(turn)
        if not reasons and self.every_k_turns and turn - self.last_reminder >= self.every_k_turns:
            reasons = [f"the regular reminder, every {self.every_k_turns} turns"]
        if not reasons:
            return ()
        reason = "; ".join(reasons)
        self.sent.append(reason)
        self.last_reminder = turn
        return [Inject(Message("user", checklist(reason, self.verify, self.items)))]

    def _signs(self, turn: int) -> list[str]:
        """The signs that show now; each is re-armed as it is reported."""
        reasons = []
        since = self.unverified_since
        if self.no_verify_turns and since is not None and turn - since >= self.no_verify_turns:
            reasons.append(f"{turn - since} turns since your first edit without running the verify command")
            self.unverified_since = turn
        if self.failing_edits and self.failed_edits >= self.failing_edits:
            reasons.append(f"{self.failed_edits} edits in a row failed")
            self.failed_edits = 0
        if self.failing_edits and self.failed_after_edit >= self.failing_edits:
            reasons.append(f"{self.failed_after_edit} edits in a row were followed by failing tests")
            self.failed_after_edit = 0
        if self.paused_s is not None:
            reasons.append(f"a pause of {self.paused_s:.0f} s since the last model call")
            self.paused_s = None
        return reasons

    def after_tool_call(self, state: LoopState, call: ToolCall, outcome: ToolOutcome) -> Sequence[Action]:
        if call.name in EDIT_TOOLS:
            if outcome.is_error:
                self.failed_edits += 1
                return ()
            self.failed_edits = 0
            self.edited_since_test = True
            if self.unverified_since is None:
                self.unverified_since = state.turns
            return ()
        command = call.arguments.get("command") if call.name == SHELL else None
        if not isinstance(command, str):
            return ()
        command = _words(command)
        verifying = bool(self.verify) and self.verify in command
        if verifying:
            self.unverified_since = None
        if verifying or _TEST_RUN.search(command):
            exit_code = _EXIT.match(outcome.content)
            failed = outcome.is_error or exit_code is None or exit_code.group(1) != "0"
            if failed and self.edited_since_test:
                self.failed_after_edit += 1
            elif not failed:
                self.failed_after_edit = 0
            self.edited_since_test = False
        return ()
