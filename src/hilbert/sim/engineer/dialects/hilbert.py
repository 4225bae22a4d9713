"""hilbert's own tools: read_file, write_file, edit_file, list_files, grep, shell, finish.

Chosen when a request offers at least `shell`, `read_file`, `edit_file` and `finish`; `grep`,
`list_files` and `write_file` are used when offered, else done through `shell`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hilbert.models.types import Message, ToolCall
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

REQUIRED = frozenset({"shell", "read_file", "edit_file", "finish"})


@dataclass(frozen=True)
class HilbertDialect:
    offered: frozenset[str]
    name: str = "hilbert"

    def render(self, action: Action, call_id: str) -> Reply:
        if isinstance(action, Say):
            return Reply(text=action.text)
        name, arguments = self._call(action)
        why = "" if isinstance(action, Finish) else action.why
        return Reply(text=why, tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))

    def _call(self, action: Action) -> tuple[str, dict[str, Any]]:
        match action:
            case Run(command=command):
                return "shell", {"command": command}
            case Read(path=path, start=start, end=end):
                lines = {"start_line": start, "end_line": end}
                return "read_file", {"path": path, **{k: v for k, v in lines.items() if v is not None}}
            case Edit(path=path, old=old, new=new):
                return "edit_file", {"path": path, "old": old, "new": new}
            case Write(path=path, content=content) if "write_file" in self.offered:
                return "write_file", {"path": path, "content": content}
            case Write(path=path, content=content):
                return "shell", {"command": f"printf %s {shlex.quote(content)} > {shlex.quote(path)}"}
            case Grep(pattern=pattern, path=path, glob=glob) if "grep" in self.offered:
                return "grep", {"pattern": pattern, "path": path, **({"glob": glob} if glob else {})}
            case Grep(pattern=pattern, path=path, glob=glob):
                include = f" --include={shlex.quote(glob)}" if glob else ""
                return "shell", {"command": f"grep -rnE {shlex.quote(pattern)} {shlex.quote(path)}{include}"}
            case ListFiles(pattern=pattern) if "list_files" in self.offered:
                return "list_files", {"pattern": pattern}
            case ListFiles(pattern=pattern):
                name = shlex.quote(pattern.rsplit("/", 1)[-1])
                return "shell", {"command": f"find . -path './.*' -prune -o -type f -name {name} -print"}
            case Finish(claim=claim, evidence=evidence):
                return "finish", {"claim": claim, "evidence": evidence}
        raise TypeError(f"no hilbert tool for {action!r}")

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        return command_observation(results, notes)


def detect(conversation: Conversation) -> HilbertDialect | None:
    offered = frozenset(tool.name for tool in conversation.tools)
    return HilbertDialect(offered) if offered >= REQUIRED else None
