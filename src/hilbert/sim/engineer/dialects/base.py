"""The dialect seam: how abstract engineer actions become the tool calls a request offers.

A dialect module exposes `detect(conversation) -> Dialect | None` (None: "these are not my tools")
and its `Dialect` does two things: `render` one action as a `Reply` (tool calls and/or text), and
`observe` the messages that answered it as one `Observation`. Add a dialect by adding a module
and listing its `detect` in `dialects/__init__.py`; the engineer does not change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from hilbert.models.types import Message, ToolSpec
from hilbert.sim.engineer.actions import Action, Observation
from hilbert.testing.fake_server.responder import Reply

_EXIT_CODE = (
    re.compile(r"^\[exit (-?\d+)\]\n?"),  # hilbert's shell tool
    re.compile(r"^<returncode>(-?\d+)</returncode>\n?"),  # mini-swe-agent
    re.compile(r"^(?:exit code|exit status|returncode)[:=]?\s*(-?\d+)\n?", re.IGNORECASE),
)
_OUTPUT_TAGS = re.compile(r"^<output>\n?(.*?)\n?</output>\s*$", re.DOTALL)
# the harness's answer to a call it never ran (hilbert's loop, resuming a conversation after a kill);
# read from the text: the OpenAI chat wire does not carry a tool result's error mark
_NOT_RUN = re.compile(r"^not run: ")


class Dialect(Protocol):
    """Maps the engineer's actions onto one client's tools and reads the results back.

    Two optional hooks, looked up with getattr by the responder, serve clients whose conversation is not
    a plain tool loop (aider): `transcript(conversation) -> Conversation` keeps only the engineer's
    own turns, and `answer(action, turn) -> Observation | None` answers an action from what the
    client already sent (e.g. a file's content in the chat) without spending a model turn.
    """

    @property
    def name(self) -> str: ...

    def render(self, action: Action, call_id: str) -> Reply: ...

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation: ...


def command_observation(results: Sequence[Message], notes: Sequence[Message]) -> Observation:
    """Read a command tool's answer: an exit-code header in one of the common shapes, then output; an
    error answer that says the call was not run is no output of it (`Observation.ran`)."""
    text = "\n".join(m.content for m in results)
    ran = not any(_NOT_RUN.match(m.content) for m in results)
    exit_code = None
    for pattern in _EXIT_CODE:
        if match := pattern.match(text):
            exit_code, text = int(match.group(1)), text[match.end() :]
            break
    if match := _OUTPUT_TAGS.match(text):
        text = match.group(1)
    return Observation(
        text=text,
        ok=not any(m.is_error for m in results),
        exit_code=exit_code,
        notes=tuple(m.content for m in notes),
        ran=ran,
    )


def string_param(tool: ToolSpec, name: str) -> bool:
    prop = tool.parameters.get("properties", {}).get(name)
    return isinstance(prop, dict) and prop.get("type") == "string"
