"""One shell tool with a string `command` parameter (mini-swe-agent style), for every action.

Reads are `cat -n` (piped through `sed -n 'A,Bp'` for a range), searches `grep -rnE`, edits a
`python3 -c` one-liner that replaces a unique exact occurrence (and fails loudly otherwise).
Finishing is a final text message; when the prompt asks to end with
`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` (mini-swe-agent), it runs that instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

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
from hilbert.sim.engineer.dialects.base import command_observation, string_param
from hilbert.testing.fake_server.responder import Conversation, Reply

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_REPLACE = (
    "import pathlib,sys;p=pathlib.Path(sys.argv[1]);s=p.read_text();o,n=sys.argv[2],sys.argv[3];"
    'c=s.count(o);c==1 or sys.exit(f"{p}: old text found {c} times, expected once");'
    'p.write_text(s.replace(o,n));print("edited",p)'
)


@dataclass(frozen=True)
class BashDialect:
    tool: str
    submit: bool = False
    name: str = "bash"

    def render(self, action: Action, call_id: str) -> Reply:
        if isinstance(action, Say):
            return Reply(text=action.text)
        if isinstance(action, Finish):
            if not self.submit:
                return Reply(text=f"{action.claim}\n\nEvidence:\n{action.evidence}")
            text, command = f"{action.claim}\n\nEvidence:\n{action.evidence}", f"echo {SUBMIT}"
        else:
            text, command = action.why, self.command(action)
        return Reply(
            text=text, tool_calls=(ToolCall(id=call_id, name=self.tool, arguments={"command": command}),)
        )

    def command(self, action: Action) -> str:
        q = shlex.quote
        match action:
            case Run(command=command):
                return command
            case Read(path=path, start=None, end=None):
                return f"cat -n {q(path)}"
            case Read(path=path, start=start, end=end):
                return f"cat -n {q(path)} | sed -n '{start or 1},{end or '$'}p'"
            case Edit(path=path, old=old, new=new):
                return f"python3 -c {q(_REPLACE)} {q(path)} {q(old)} {q(new)}"
            case Write(path=path, content=content):
                return f"cat > {q(path)} <<'HILBERT_EOF'\n{content}\nHILBERT_EOF"
            case Grep(pattern=pattern, path=path, glob=glob):
                include = f" --include={q(glob)}" if glob else ""
                return f"grep -rnE {q(pattern)} {q(path)}{include}"
            case ListFiles(pattern=pattern):
                name = q(pattern.rsplit("/", 1)[-1])
                return f"find . -path './.*' -prune -o -type f -name {name} -print | sort"
        raise TypeError(f"no shell command for {action!r}")

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        return command_observation(results, notes)


def detect(conversation: Conversation) -> BashDialect | None:
    tools = conversation.tools
    if len(tools) != 1 or not string_param(tools[0], "command"):
        return None
    prompt = conversation.system + "\n".join(m.content for m in conversation.messages[:1])
    return BashDialect(tools[0].name, submit=SUBMIT in prompt)
