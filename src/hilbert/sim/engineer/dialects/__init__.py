"""Dialects: which tools the engineer drives, chosen from the tools a request offers.

`choose(conversation, name=None)` asks each detector in `DETECTORS` in order (specific tool sets
first, the generic single-shell-tool dialect last; the third-party agents' dialects live in
`external.py` and `aider.py` here) and takes the first that recognises the tools.
When none does, the fallback `Unequipped` dialect answers every turn with a text reply that says
which tools were offered and which it knows, so a misconfigured run stops with a clear message
instead of guessing. To add a dialect, add a module with a `detect` and list it here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hilbert.errors import UserError
from hilbert.models.types import Message
from hilbert.sim.engineer.actions import Action, Observation
from hilbert.sim.engineer.dialects import bash, external, hilbert
from hilbert.sim.engineer.dialects.base import Dialect, command_observation
from hilbert.testing.fake_server.responder import Conversation, Reply

Detector = Callable[[Conversation], Dialect | None]
# Order matters: third-party agents' tool sets (Claude Code, Codex, mini-swe-agent, aider) first,
# then hilbert's own tools, then any single shell tool.
DETECTORS: dict[str, Detector] = {
    **external.DETECTORS,
    "hilbert": hilbert.detect,
    "bash": bash.detect,
}


@dataclass(frozen=True)
class Unequipped:
    """The fallback: no known tools, so say so and do nothing."""

    offered: tuple[str, ...]
    name: str = "unequipped"

    def render(self, action: Action, call_id: str) -> Reply:
        offered = ", ".join(self.offered) or "none"
        return Reply(
            text=f"I cannot work on this: I do not know how to use the tools offered ({offered}). "
            "I can use hilbert's tools (shell, read_file, edit_file, finish, ...) "
            "or a single shell tool with a `command` parameter."
        )

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        return command_observation(results, notes)


def choose(conversation: Conversation, name: str | None = None) -> Dialect:
    if name is not None:
        if name not in DETECTORS:
            raise UserError(f"unknown engineer dialect {name!r}", hint="known: " + ", ".join(DETECTORS))
        detectors: Sequence[Detector] = (DETECTORS[name],)
    else:
        detectors = tuple(DETECTORS.values())
    for detect in detectors:
        if (dialect := detect(conversation)) is not None:
            return dialect
    return Unequipped(tuple(tool.name for tool in conversation.tools))


__all__ = ["DETECTORS", "Dialect", "Unequipped", "choose"]
