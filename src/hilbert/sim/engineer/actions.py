"""What the engineer can do and what it sees, independent of any tool set.

The engineer thinks in these abstract actions; a dialect (see `dialects/`) turns each into a tool
call of the tools a request offers, and turns the tool's answer back into an `Observation`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """Run a shell command in the project root."""

    command: str
    why: str = ""


@dataclass(frozen=True)
class Read:
    """Read a file (1-based, inclusive line range when given); the answer is `cat -n` style."""

    path: str
    start: int | None = None
    end: int | None = None
    why: str = ""


@dataclass(frozen=True)
class Grep:
    """Search files for a regular expression; the answer is `path:lineno:text` lines."""

    pattern: str
    path: str = "."
    glob: str | None = None
    why: str = ""


@dataclass(frozen=True)
class ListFiles:
    """List the files matching a glob, one relative path a line."""

    pattern: str = "**/*"
    why: str = ""


@dataclass(frozen=True)
class Edit:
    """Replace the unique exact occurrence of `old` in a file with `new`."""

    path: str
    old: str
    new: str
    why: str = ""


@dataclass(frozen=True)
class Write:
    """Write a whole file."""

    path: str
    content: str
    why: str = ""


@dataclass(frozen=True)
class Finish:
    """Stop, claiming `claim` with `evidence` (the output that shows it)."""

    claim: str
    evidence: str


@dataclass(frozen=True)
class Say:
    """A text-only turn: no tool call."""

    text: str


Action = Run | Read | Grep | ListFiles | Edit | Write | Finish | Say


@dataclass(frozen=True)
class Observation:
    """What came back after one action: the tool's answer (`text`, without dialect wrappers), whether
    the tool refused or failed (`ok`), a command's exit code when the answer tells it, `notes`: the
    other messages that arrived before the engineer's next turn (feedback, reminders), and whether the
    call ran at all (`ran`: not when the harness answered it "not run", e.g. a conversation resumed
    after a kill that came before the call's result was recorded; the engineer makes it again)."""

    text: str = ""
    ok: bool = True
    exit_code: int | None = None
    notes: tuple[str, ...] = ()
    ran: bool = True

    @property
    def succeeded(self) -> bool:
        return self.ok and self.exit_code in (None, 0)


_MANY = r"found (?:[2-9]|[1-9]\d+) times|not unique|more than once"  # the text is right, not unique
NOT_UNIQUE = re.compile(_MANY, re.IGNORECASE)
# an edit tool's refusal, read from its text: over some wires (OpenAI's chat) a tool error loses its mark
_EDIT_REFUSED = re.compile(rf"{_MANY}|\bnot found\b|\brefused\b|^\w*Error\b", re.I | re.M)


def made(edit: Edit, observation: Observation) -> bool:
    """Whether the edit tool made `edit` (over some wires a refusal is only in its words)."""
    return observation.succeeded and not _EDIT_REFUSED.search(observation.text)
