"""`longhaul`: a fake-server responder for an agent whose task outgrows its context — the one that shows
compaction keeping the task state.

    longhaul               writes part1.txt … part30.txt, one a turn, then verifies and finishes
    longhaul:parts=N       N parts

Every turn it writes the next part and looks at a long listing (`seq 1 300`), so its context grows by
a few hundred tokens a turn. It decides only from what it is sent, like every fake-server responder: the
next part follows the highest part it sees itself having written (a cut keeps the latest turns); the
verify command comes from the task ("done when `CMD` passes"),
which compaction must keep. A summarizing request (compaction's model summary) gets a short summary.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from hilbert.errors import UserError
from hilbert.models.types import ToolCall
from hilbert.testing.fake_server.responder import Conversation, Reply

PART = re.compile(r"part(\d+)\.txt")
VERIFY = re.compile(r"done when `([^`]+)` passes")
LISTING = "seq 1 300"


@dataclass(frozen=True)
class LonghaulResponder:
    parts: int = 30
    name = "longhaul"  # a class attribute, not a field

    @classmethod
    def from_options(cls, options: Mapping[str, str], seed: int) -> LonghaulResponder:
        if set(options) - {"parts"} or not options.get("parts", "30").isdigit():
            raise UserError("responder 'longhaul' takes parts=N and nothing else", hint="longhaul:parts=30")
        return cls(max(1, int(options.get("parts", "30"))))

    def reply(self, conversation: Conversation) -> Reply:
        if conversation.system.startswith("You are compacting"):
            return Reply(
                text="## Goal\n- write the parts\n## Completed\n- the earlier parts\n## Pending\n- the rest"
            )
        said = "\n".join(m.content for m in conversation.messages)
        verify = VERIFY.search(said)
        if verify is None:
            return Reply(text="I no longer know what my task is: its verify command is gone from my context.")
        written = [
            int(found.group(1))
            for m in conversation.messages
            for c in m.tool_calls
            if c.name == "write_file" and (found := PART.search(str(c.arguments.get("path", ""))))
        ]
        last = max(written, default=0)
        tag = hashlib.sha256(f"{len(conversation.messages)}:{last}".encode()).hexdigest()[:10]
        if last < self.parts:
            write = {"path": f"part{last + 1}.txt", "content": f"{last + 1}\n"}
            return Reply(
                text=f"Writing part{last + 1}.txt of {self.parts}.",
                tool_calls=(
                    ToolCall(f"w_{tag}", "write_file", write),
                    ToolCall(f"s_{tag}", "shell", {"command": LISTING}),
                ),
            )
        command = verify.group(1)
        ran = any(
            c.name == "shell" and c.arguments.get("command") == command
            for m in conversation.messages
            for c in m.tool_calls
        )
        if not ran:
            return Reply(tool_calls=(ToolCall(f"v_{tag}", "shell", {"command": command}),))
        evidence = f"`{command}` ran and printed {self.parts}"
        return Reply(
            tool_calls=(
                ToolCall(
                    f"f_{tag}", "finish", {"claim": f"wrote all {self.parts} parts", "evidence": evidence}
                ),
            )
        )


__all__ = ["LonghaulResponder"]
