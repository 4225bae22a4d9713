"""The pinned task state: what no compaction may lose, restated after every cut.

Pinned (`is_pinned`), never masked by any strategy: the system prompt and the task (the first two
messages, which no strategy drops either), the messages the harness wrote for compaction (the pinned
state itself, a summary), and the stop gate's feedback (`hilbert.judge.rounds.FEEDBACK` /
`PANEL_FEEDBACK`: the judge's word on why the task is not done yet). A cut drops whole turns, a
feedback message with its turn; the latest feedback, the unresolved one, is restated whole in the
pinned state after every cut, so it is never compacted away (earlier ones were answered by a later
check of the gate).

`pinned_state(messages)` is the one `user` message, marked as the harness's, that a strategy puts
right after a cut: the task's first line, its acceptance checks (the verify command and expected
claims the fleet's task prompt states, and the task's checklist), its rules (the task's own "do not
/ never / only" lines, and the reminders' global list), the files the agent changed so far, the
edits it made and undid (`hilbert.context.tried`: a search the cut would otherwise start over), and the
latest unresolved judge feedback (the last stop-gate message: a passing verdict ends the run, so one
still in the conversation is unresolved). It is a function of the messages alone, so a strategy that
places it stays pure.

What must not live here: when to cut (the strategies) or how to summarize (`summarize.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from hilbert.agent.reminders import GLOBAL_ITEMS, acceptance_items
from hilbert.context.tried import TRIED_HERE, tried_edits, tried_note
from hilbert.models.types import Message

PINNED_MARK = "[hilbert harness: your task state, restated after earlier turns were compacted]"
SUMMARY_MARK = "[hilbert harness: summary of earlier turns, which were compacted]"
# the first words of the stop gate's messages (hilbert.judge.rounds.FEEDBACK, PANEL_FEEDBACK; a test
# checks they still match)
FEEDBACK_PREFIXES = (
    "The harness committed your work (",
    "The checks passed on your commit (",
)
MAX_RULES = 8
MAX_LINE_CHARS = 240
MAX_FILES = 20
MAX_TRIED_CHARS = 2_000  # of the edits tried and undone (the latest kept)

_VERIFY = re.compile(r"(?:is done when|Verify command:)\s*`([^`\n]+)`")
_CLAIMS = re.compile(r"\(expected: (.+)\)\.?[ \t]*$", re.MULTILINE)  # WORKER_TASK's: ends its line
_RULE = re.compile(r"\b(?:do not|don't|never|must|only|always|avoid)\b", re.IGNORECASE)
_EDITS = frozenset({"edit_file", "write_file"})
_STATUS = re.compile(r"^\[(exit -?\d+|timed out after \d+s|killed by \w+)")
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")
_BASH = re.compile(r"```(?:bash|sh)?[ \t]*\n(.*?)```", re.DOTALL)


def is_feedback(message: Message) -> bool:
    return message.role == "user" and message.content.startswith(FEEDBACK_PREFIXES)


def is_observation(messages: Sequence[Message], index: int) -> bool:
    """A tool result, or (mini-swe-agent's format, which has no tool calls) a user message right after
    an assistant message without tool calls; never the first two messages or the judge's feedback."""
    if index < 2:
        return False
    message = messages[index]
    if message.role == "tool":
        return True
    before = messages[index - 1]
    return (
        message.role == "user"
        and before.role == "assistant"
        and not before.tool_calls
        and not is_feedback(message)
    )


def command_of(messages: Sequence[Message], index: int) -> str:
    """The command whose output observation `messages[index]` is (a shell command, else the tool call
    as `name({arguments})`, or mini-swe-agent's bash block), on one line."""
    message = messages[index]
    for before in reversed(messages[:index]):
        if before.role != "assistant":
            continue
        for call in before.tool_calls:
            if call.id == message.tool_call_id:
                shown = call.arguments.get("command") if call.name == "shell" else None
                if not isinstance(shown, str):
                    shown = f"{call.name}({json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)})"
                return _clip(" ".join(shown.split()))
        found = _BASH.findall(before.content) if not before.tool_calls else []
        return _clip(" ".join(found[-1].split())) if found else message.name or "?"
    return message.name or "?"


def status_of(message: Message) -> str:
    """How the command of an observation ended: `exit N`, `timed out after Ns`, `killed by SIG…`,
    else `error` or `ok` (a tool's own verdict)."""
    found = _STATUS.match(message.content) or _RETURNCODE.search(message.content[:200])
    if found:
        return found.group(1) if found.re is _STATUS else f"exit {found.group(1)}"
    return "error" if message.is_error else "ok"


def is_harness(message: Message) -> bool:
    """A message the compaction wrote (the pinned state or a summary)."""
    return message.role == "user" and message.content.startswith((PINNED_MARK, SUMMARY_MARK))


def is_pinned(messages: Sequence[Message], index: int) -> bool:
    """Whether `messages[index]` must never be masked or dropped."""
    return index < 2 or is_harness(messages[index]) or is_feedback(messages[index])


def is_rule(line: str) -> bool:
    """Whether a line of an instruction reads as a rule ("do not", "never", "only", "must" ...)."""
    return bool(_RULE.search(line))


def rule_line(line: str) -> str:
    return _clip(" ".join(line.split()))


def verify_command(task: str) -> str:
    found = _VERIFY.search(task)
    return found.group(1).strip() if found else ""


def rules(task: str) -> list[str]:
    """The task's rule lines ("do not", "never", "only", "must" ...), then the reminders' global list."""
    verify = verify_command(task)
    lines = [rule_line(line) for line in task.splitlines() if is_rule(line)]
    general = [item.format(verify=verify) for item in GLOBAL_ITEMS if verify or "{verify}" not in item]
    found: list[str] = []
    for line in [*lines[:MAX_RULES], *general]:
        if line and line not in found:
            found.append(line)
    return found


def changed_files(messages: Sequence[Message]) -> list[str]:
    """The paths of the agent's successful edit_file / write_file calls, first change first."""
    failed = {m.tool_call_id for m in messages if m.role == "tool" and m.is_error}
    paths: list[str] = []
    for message in messages:
        for call in message.tool_calls:
            path = call.arguments.get("path")
            if call.name in _EDITS and call.id not in failed and isinstance(path, str) and path not in paths:
                paths.append(path)
    return paths


def pinned_state(messages: Sequence[Message]) -> Message:
    """The task state of the conversation `messages` (its first two messages: system and task), as
    the one harness message a strategy restates after a cut."""
    task = messages[1].content if len(messages) > 1 else ""
    title = next(  # the first line but the loop's `Agent: NAME`
        (line.strip() for line in task.splitlines() if line.strip() and not line.startswith("Agent: ")), ""
    )
    verify = verify_command(task)
    checks = acceptance_items(task, verify)
    claims = _CLAIMS.search(task)
    if claims:
        checks.append(f"your change shows: {claims.group(1)}")
    lines = [
        PINNED_MARK,
        f"Task (its full text is the first user message, unchanged): {_clip(title)}",
        "Acceptance checks:",
        *(f"- {_clip(item)}" for item in checks[:MAX_RULES] or ["the task's own statement of done"]),
        "Rules:",
        *(f"- {rule}" for rule in rules(task)),
    ]
    files = changed_files(messages)
    if files:
        more = f" (+{len(files) - MAX_FILES} more)" if len(files) > MAX_FILES else ""
        lines.append(f"Files you changed so far: {', '.join(files[:MAX_FILES])}{more}")
    tried = tried_note(tried_edits(messages), TRIED_HERE, MAX_TRIED_CHARS)
    if tried:
        lines.append(tried)
    feedback = next((m.content for m in reversed(messages[2:]) if is_feedback(m)), None)
    if feedback is not None:
        lines += ["Unresolved judge feedback (the latest, whole; fix it before you finish again):", feedback]
    return Message("user", "\n".join(lines), cache_point=True)  # the new stable prefix ends here


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


__all__ = [
    "FEEDBACK_PREFIXES",
    "PINNED_MARK",
    "SUMMARY_MARK",
    "changed_files",
    "command_of",
    "is_feedback",
    "is_harness",
    "is_observation",
    "is_pinned",
    "is_rule",
    "pinned_state",
    "rule_line",
    "rules",
    "status_of",
    "verify_command",
]
