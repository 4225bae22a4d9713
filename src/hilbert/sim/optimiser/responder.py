"""`optimiser`: a fake-server responder that plays a climb's explorer on the sample project.

    optimiser                 ideas by seed: try N takes idea (offset + N) mod 6, the offset drawn
                                from the seed (tries are numbered across the explorers, so any 6
                                tries in a row try every idea once: a short climb meets a good one)
    optimiser:ideas=dict+cache  try N takes the Nth of these ideas, cycling (keys in `ideas.py`)
    optimiser:ideas_file=F.json try N takes the Nth idea of the file, cycling: a JSON list of
                                {"key", "kind", "title", "files": {path: whole text}} (a red team's
                                tries, written without hilbert's guards in view)

Each try: read `pairs.py`, write the idea's files (whole), finish with the idea's title as the claim.
It reads the explorer's name and try number from the try prompt (`hilbert.climb.tries.TRY_PROMPT`)
and decides from the conversation alone, like every responder.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hilbert.errors import UserError
from hilbert.models.types import ToolCall
from hilbert.sim.optimiser.ideas import Idea, ideas
from hilbert.testing.fake_server.responder import Conversation, Reply

TRY = re.compile(r"You are (.+?), an explorer in a hill-climb; this is try (\d+)\.")


@dataclass(frozen=True)
class OptimiserResponder:
    seed: int = 0
    only: tuple[str, ...] = ()
    extra: tuple[Idea, ...] = ()  # from an ideas file
    name = "optimiser"  # a class attribute, not a field

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int) -> OptimiserResponder:
        extra = _ideas_file(Path(options["ideas_file"])) if "ideas_file" in options else ()
        known = {idea.key for idea in (*ideas(), *extra)}
        unknown = set(options) - {"ideas", "ideas_file"}
        chosen = tuple(k for k in options.get("ideas", "").split("+") if k)
        if unknown or set(chosen) - known:
            raise UserError(
                f"bad optimiser options {dict(options)}",
                hint=f"use optimiser:ideas=KEY+KEY... with {sorted(known)}, or ideas_file=PATH",
            )
        return cls(seed, chosen or tuple(idea.key for idea in extra), extra)

    def pick(self, try_no: int) -> Idea:
        catalogue = (*ideas(), *self.extra)
        if self.only:  # in this order, by try number
            return next(i for i in catalogue if i.key == self.only[(try_no - 1) % len(self.only)])
        digest = hashlib.sha256(f"{self.seed}".encode()).digest()
        return catalogue[(digest[0] + try_no) % len(catalogue)]

    def reply(self, conversation: Conversation) -> Reply:
        first = next((m.content for m in conversation.messages if m.role == "user"), "")
        found = TRY.search(first)
        if found is None:
            return Reply(
                text="I only take climb tries.",
                tool_calls=(_call(0, "finish", claim="nothing to do", evidence="no try prompt"),),
            )
        idea = self.pick(int(found.group(2)))
        turn = sum(1 for m in conversation.messages if m.role == "assistant")
        if turn == 0:
            return Reply(tool_calls=(_call(turn, "read_file", path="pairs.py"),))
        if turn <= len(idea.files):
            path, content = idea.files[turn - 1]
            return Reply(tool_calls=(_call(turn, "write_file", path=path, content=content),))
        evidence = f"wrote {', '.join(path for path, _ in idea.files)} ({idea.kind} idea)"
        return Reply(tool_calls=(_call(turn, "finish", claim=idea.title, evidence=evidence),))


def _ideas_file(path: Path) -> tuple[Idea, ...]:
    """The ideas of a JSON file: a list of {"key", "kind", "title", "files": {path: text}}."""
    try:
        data = json.loads(path.read_text())
        found = tuple(
            Idea(str(item["key"]), item["kind"], str(item["title"]), tuple(dict(item["files"]).items()))
            for item in data
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(
            f"ideas file {path}: {err}",
            hint='a JSON list of {"key", "kind", "title", "files": {"path": "whole text"}}',
        ) from None
    if not found or any(i.kind not in ("good", "neutral", "gaming") or not i.files for i in found):
        raise UserError(f"ideas file {path}: each idea needs a kind (good, neutral, gaming) and files")
    return found


def _call(turn: int, name: str, **arguments: str) -> ToolCall:
    return ToolCall(f"call_opt_{turn}", name, dict(arguments))


__all__ = ["OptimiserResponder"]
