"""The aider dialect: no tools; aider shows the chat's files in the conversation, applies the
SEARCH/REPLACE blocks of a reply, runs the test command after each edit (`--auto-test`) and sends a
failing output back ("I ran this command: ..."), up to 3 times a message; `/test` lines a user types
send the output too.

So the engineer takes a real turn only to edit (a SEARCH/REPLACE block) or to ask for something it
cannot see (asking the user to run the tests, or to add a file); everything else it answers itself
from what aider sent: reads and searches from the files shown, test runs from the last test output
when no edit came after it. That needs two optional hooks of the dialect seam, which the responder calls
when a dialect has them:

    transcript(conversation) -> Conversation   the engineer's own turns: aider's few-shot examples,
        file listings and "Ok." acknowledgements dropped; each answer aider gave to a turn becomes
        a tool message (`edit`: applied or not; `reply`: the text); test outputs stay user notes
    answer(action, turn) -> Observation | None   an action answered without a model turn, from what
        had arrived before the engineer's turn number `turn`

Facts about aider 0.86.2 this relies on: the SEARCH/REPLACE block format; the headers of its file
listings; files shown with the current content (earlier contents are recovered by undoing the
engineer's later edits); a failed block answered with "SEARCH/REPLACE block(s) failed to match".
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hilbert.models.types import Message
from hilbert.sim.engineer.actions import (
    Action,
    Edit,
    Finish,
    Grep,
    ListFiles,
    Observation,
    Read,
    Run,
    Say,
    Write,
)
from hilbert.sim.engineer.dialects.base import command_observation
from hilbert.testing.fake_server.responder import Conversation, Reply

_EXAMPLES_END = "I switched to a new code base."
_LISTINGS = (
    "I have *added these files to the chat*",
    "Here are some READ ONLY files",
    "Here are summaries of some files present in my git repository",
)
_ACKS = frozenset(
    {
        "Ok.",
        "Ok",
        "Ok, I will use these files as references.",
        "Ok, any changes I propose will be to those files.",
        "Ok, I won't try and edit those files without asking first.",
    }
)
_RULES = "\n# *SEARCH/REPLACE block* Rules:"
_RAN = re.compile(r"I ran this command:\n\n(.*?)\n\nAnd got this output:\n\n(.*)", re.DOTALL)
_NO_MATCH = "SEARCH/REPLACE block failed to match"
_FILE = re.compile(
    r"^([^\n]+)\n(```+|<source>|<code>)\n(.*?)(?:```+|</source>|</code>)\n(?=\n[^\n]+\n(?:```|<)|\Z)",
    re.DOTALL | re.MULTILINE,
)
_BLOCK = re.compile(
    r"^([^\n]+)\n```[^\n]*\n<<<<<<< SEARCH\n(.*?)^=======\n(.*?)^>>>>>>> REPLACE\n```",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class _Turn:
    """One engineer turn as aider answered it: the edits its reply made (path, search, replace)
    and whether they applied, the test output that came back after it, if any."""

    edits: tuple[tuple[str, str, str], ...]
    applied: bool
    output: str | None


@dataclass(frozen=True)
class AiderDialect:
    """Built from one request: the engineer's turns, the files as shown now, the first test output."""

    files: dict[str, str]
    turns: tuple[_Turn, ...]
    first_output: str | None
    messages: tuple[Message, ...] = field(default=())
    name: str = "aider"

    # --- the two optional hooks -----------------------------------------------------------------
    def transcript(self, conversation: Conversation) -> Conversation:
        return Conversation(
            conversation.protocol, conversation.model, conversation.system, self.messages, conversation.tools
        )

    def answer(self, action: Action, turn: int) -> Observation | None:
        match action:
            case Run(command=command) if "pytest" in command:
                output = self._fresh_output(turn)
                return None if output is None else _test_result(command, output)
            case Read(path=path, start=start, end=end):
                content = self.files_at(turn).get(_clean(path))
                return None if content is None else Observation(text=_numbered(content, start, end))
            case Grep(pattern=pattern, glob=glob):
                return _grep(self.files_at(turn), pattern, glob)
            case ListFiles(pattern=pattern):
                names = sorted(
                    n
                    for n in self.files_at(turn)
                    if fnmatch.fnmatch(n.rsplit("/", 1)[-1], pattern.rsplit("/", 1)[-1])
                )
                return Observation(text="\n".join(names), exit_code=0)
        return None

    def _fresh_output(self, turn: int) -> str | None:
        """The test output that arrived right before turn `turn` (none when an edit came after it)."""
        if turn == 0:
            return self.first_output
        return self.turns[turn - 1].output

    def files_at(self, turn: int) -> dict[str, str]:
        """The files as they were before turn `turn`: the shown contents with later edits undone."""
        files = dict(self.files)
        for later in reversed(self.turns[turn:]):
            if later.applied:
                for path, search, replace in reversed(later.edits):
                    if path in files and replace and replace in files[path]:
                        files[path] = files[path].replace(replace, search, 1)
        return files

    # --- the seam -------------------------------------------------------------------------------
    def render(self, action: Action, call_id: str) -> Reply:
        match action:
            case Edit(path=path, old=old, new=new, why=why):
                return Reply(text=f"{why}\n\n{_block(path, old + chr(10), new + chr(10) if new else '')}")
            case Write(path=path, content=content, why=why):
                current = self.files.get(_clean(path), "")
                return Reply(text=f"{why}\n\n{_block(path, current, content)}")
            case Run(command=command, why=why):
                return Reply(text=f"{why}\n\nPlease run `{command}` and show me its output.".strip())
            case Read(path=path, why=why):
                return Reply(text=f"{why}\n\nPlease add {path} to the chat so that I can read it.".strip())
            case Finish(claim=claim, evidence=evidence):
                return Reply(text=f"{claim}\n\nEvidence:\n{evidence}")
            case Say(text=text):
                return Reply(text=text)
        return Reply(text=getattr(action, "why", "") or "I have nothing to add.")

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        if results and results[-1].name == "reply":
            return command_observation(results[-1:], notes)
        result = results[-1] if results else Message("tool", "", is_error=True)
        return Observation(text=result.content, ok=not result.is_error, notes=tuple(m.content for m in notes))


def _block(path: str, search: str, replace: str) -> str:
    return f"{path}\n```python\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


def _clean(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _numbered(content: str, start: int | None, end: int | None) -> str:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first = start or 1
    chosen = lines[first - 1 : end]
    return "".join(f"{first + i:6}\t{line}\n" for i, line in enumerate(chosen))


def _grep(files: dict[str, str], pattern: str, glob: str | None) -> Observation:
    try:
        regex = re.compile(pattern)
    except re.error as err:
        return Observation(text=f"grep: {err}", ok=False, exit_code=2)
    hits = [
        f"{name}:{number}:{line}"
        for name in sorted(files)
        if glob is None or fnmatch.fnmatch(name.rsplit("/", 1)[-1], glob)
        for number, line in enumerate(files[name].split("\n"), 1)
        if regex.search(line)
    ]
    return Observation(text="\n".join(hits), exit_code=0 if hits else 1)


def _test_result(command: str, output: str) -> Observation:
    """A test command's result read from aider's last test output (the whole suite, failing: aider
    only sends it on a non-zero exit). A run of selected tests passes when none of them failed."""
    selected = [word for word in command.split() if "::" in word]
    failed = not selected or any(f"FAILED {test}" in output or f"ERROR {test}" in output for test in selected)
    return Observation(text=output, exit_code=1 if failed else 0)


def _listing(text: str) -> dict[str, str]:
    return {_clean(m.group(1).strip()): m.group(3) for m in _FILE.finditer(text)}


def _edits(text: str) -> tuple[tuple[str, str, str], ...]:
    return tuple((_clean(m.group(1).strip()), m.group(2), m.group(3)) for m in _BLOCK.finditer(text))


def _engineer_view(messages: Sequence[Message]) -> tuple[list[Message], dict[str, str]]:
    """aider's messages without its examples, listings and acknowledgements; the files listed."""
    start = next(
        (i + 1 for i, m in enumerate(messages) if m.role == "user" and m.content.startswith(_EXAMPLES_END)), 0
    )
    kept: list[Message] = []
    files: dict[str, str] = {}
    for message in messages[start:]:
        if message.role not in ("user", "assistant"):
            continue
        content = (
            message.content.split(_RULES, 1)[0].rstrip("\n") if message.role == "user" else message.content
        )
        if message.role == "user" and content.startswith(_LISTINGS):
            files.update(_listing(message.content))
        elif message.role == "assistant" and content.strip() in _ACKS:
            continue
        elif not (
            kept and message.role == "user" and kept[-1].role == "user" and kept[-1].content == content
        ):
            kept.append(Message(message.role, content))
    return kept, files


def detect(conversation: Conversation) -> AiderDialect | None:
    if conversation.tools or "SEARCH/REPLACE" not in conversation.system:
        return None
    kept, files = _engineer_view(conversation.messages)
    messages: list[Message] = []
    turns: list[_Turn] = []
    first_output: str | None = None
    for message in kept:
        ran = _RAN.match(message.content) if message.role == "user" else None
        if message.role == "assistant":
            edits = _edits(message.content)
            turns.append(_Turn(edits, applied=bool(edits), output=None))
            messages.append(Message("assistant", message.content))
            messages.append(
                Message(
                    "tool", "edit: applied" if edits else "reply: no edits", name="edit" if edits else "reply"
                )
            )
            continue
        if not turns:
            first_output = ran.group(2) if ran else first_output
            messages.append(message)
        elif _NO_MATCH in message.content and turns[-1].edits:
            turns[-1] = _Turn(turns[-1].edits, applied=False, output=None)
            messages[-1] = Message("tool", message.content, name="edit", is_error=True)
        elif ran and turns[-1].edits:
            turns[-1] = _Turn(turns[-1].edits, turns[-1].applied, output=ran.group(2))
            messages.append(message)
        elif ran:  # the test output the engineer asked for: the answer to its turn
            turns[-1] = _Turn((), False, output=ran.group(2))
            messages[-1] = Message("tool", f"[exit 1]\n{ran.group(2)}", name="reply")
        else:
            messages.append(message)
    return AiderDialect(files, tuple(turns), first_output, tuple(messages))
