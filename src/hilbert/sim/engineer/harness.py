"""Drive any fake-server responder in process against a real directory: a tiny agent loop for tests.

`drive(responder, root, task)` builds each `Conversation` itself (hilbert's tool specs, or one `bash`
tool), asks the responder for a reply, runs the tool calls on the files under `root` (real files, real
subprocesses), appends the results and loops until the responder finishes. It can interject like
hilbert's policies do: nudge after a text-only turn, add a reminder every N tool results, and
review a finish claim (a non-empty answer resumes the run with that feedback). It can also lose every
N-th tool call's result, answering it as hilbert's loop answers a call whose result a killed run
never recorded (`NOT_RUN_ON_RESUME`): what a conversation resumed after a kill holds. With
`read_limit`, read_file answers long files a page at a time, as hilbert's does; with `compact_over`,
a conversation longer than that many messages loses the older half of its turns, as hilbert's
`forget` compaction drops them (`compact_once`: only the first time).

This is a test aid with hilbert's tool *contract*, not hilbert's agent loop or tool box (those live
in `hilbert.agent`): no confinement beyond refusing paths outside `root`, no event log.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hilbert.agent.loop import NOT_RUN_ON_RESUME
from hilbert.context.pinned import pinned_state
from hilbert.models.types import Message, ToolCall, ToolSpec
from hilbert.testing.fake_server.responder import Conversation, Responder

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
NUDGE = "Please go on with the task, using the tools; call finish when you are done."


def _tool(name: str, description: str, required: tuple[str, ...], **props: str) -> ToolSpec:
    schema = {
        "type": "object",
        "properties": {k: {"type": t} for k, t in props.items()},
        "required": list(required),
    }
    return ToolSpec(name, description, schema)


HILBERT_TOOLS: tuple[ToolSpec, ...] = (
    _tool(
        "read_file",
        "Read a file, numbered lines.",
        ("path",),
        path="string",
        start_line="integer",
        end_line="integer",
    ),
    _tool("write_file", "Write a whole file.", ("path", "content"), path="string", content="string"),
    _tool(
        "edit_file",
        "Replace the unique exact text old with new.",
        ("path", "old", "new"),
        path="string",
        old="string",
        new="string",
    ),
    _tool("list_files", "List files matching a glob.", (), pattern="string"),
    _tool(
        "grep",
        "Search files for a Python regex.",
        ("pattern",),
        pattern="string",
        path="string",
        glob="string",
    ),
    _tool(
        "shell", "Run a shell command in the workspace.", ("command",), command="string", timeout_s="integer"
    ),
    _tool(
        "finish",
        "Finish with a claim and the evidence for it.",
        ("claim", "evidence"),
        claim="string",
        evidence="string",
    ),
)
BASH_TOOL = _tool("bash", "Run a bash command.", ("command",), command="string")
Review = Callable[[str, str], Awaitable[str | None]]


@dataclass(frozen=True)
class Episode:
    """How a driven run went: the whole conversation, whether the responder finished, its last claim."""

    messages: tuple[Message, ...]
    finished: bool
    claim: str
    evidence: str
    replies: int


async def drive(
    responder: Responder,
    root: Path,
    task: str,
    *,
    tools: Literal["hilbert", "bash"] = "hilbert",
    system: str = "",
    max_replies: int = 300,
    max_nudges: int = 6,
    reminder: str | None = None,
    remind_every: int = 0,
    review: Review | None = None,
    env: Mapping[str, str] | None = None,
    lose_every: int = 0,
    read_limit: int = 0,
    compact_over: int = 0,
    compact_once: bool = False,
) -> Episode:
    specs = HILBERT_TOOLS if tools == "hilbert" else (BASH_TOOL,)
    submit = tools == "bash" and SUBMIT in system + task
    runner = _Runner(root.resolve(), env, read_limit)
    messages: list[Message] = [Message("user", task)]
    nudges = results = calls = 0
    claim = evidence = ""
    compactions = 0
    whole = list(messages)  # every message, as hilbert's loop keeps them for the pinned state

    def add(message: Message) -> None:
        messages.append(message)
        whole.append(message)

    for replies in range(1, max_replies + 1):
        if compact_over and len(messages) > compact_over and not (compact_once and compactions):
            messages, compactions = _compacted(messages, whole, system), compactions + 1
        reply = responder.reply(Conversation("openai-chat", "fake", system, tuple(messages), specs))
        add(Message("assistant", reply.text, reply.tool_calls))
        finished = False
        if not reply.tool_calls:
            if tools == "bash" and not submit:
                claim, finished = reply.text, True
            elif (nudges := nudges + 1) > max_nudges:
                return Episode(tuple(messages), False, claim, evidence, replies)
            else:
                add(Message("user", NUDGE))
                continue
        for call in reply.tool_calls:
            if call.name == "finish":
                claim, evidence, finished = (
                    str(call.arguments.get("claim", "")),
                    str(call.arguments.get("evidence", "")),
                    True,
                )
                add(Message("tool", "finished", tool_call_id=call.id, name=call.name))
                continue
            calls += 1
            if lose_every and calls % lose_every == 0:  # never run: the run was killed before its result
                # as the OpenAI chat wire delivers it: hilbert marks it an error, the wire drops the mark
                add(Message("tool", NOT_RUN_ON_RESUME, tool_call_id=call.id, name=call.name))
                continue
            text, is_error = await runner.run(call)
            add(Message("tool", text, tool_call_id=call.id, name=call.name, is_error=is_error))
            results += 1
            if submit and re.sub(r"^<returncode>\d+</returncode>\n<output>\n", "", text).startswith(SUBMIT):
                claim, finished = reply.text, True
        if finished:
            feedback = await review(claim, evidence) if review else None
            if not feedback:
                return Episode(tuple(messages), True, claim, evidence, replies)
            add(Message("user", feedback))
        elif reminder and remind_every and results % remind_every == 0:
            add(Message("user", reminder))
    return Episode(tuple(messages), False, claim, evidence, max_replies)


COMPACTED = "(Earlier turns were dropped to save room. Your task is the first message.)"


def _compacted(messages: list[Message], whole: list[Message], system: str) -> list[Message]:
    """The task, a note, the pinned state of the `whole` conversation so far and the newer half of
    the turns after it (whole turns), as hilbert's `forget` compaction leaves a conversation."""
    rest = messages[1:]
    starts = [i for i, m in enumerate(rest) if m.role == "assistant"]
    cut = starts[len(starts) // 2] if len(starts) > 1 else 0
    pinned = pinned_state([Message("system", system), *whole])
    return [messages[0], Message("user", COMPACTED), pinned, *rest[cut:]]


class _Runner:
    """Runs one tool call on the files under `root`; returns (text, is_error)."""

    def __init__(self, root: Path, env: Mapping[str, str] | None, read_limit: int = 0) -> None:
        self.root = root
        self.read_limit = read_limit
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            # as hilbert's runner: an edit undone within a second keeps the file's size and mtime,
            # and a cached `.pyc` of the line tried before would be what the next test run imports
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.env.update(env or {})

    async def run(self, call: ToolCall) -> tuple[str, bool]:
        args = call.arguments
        try:
            if call.name in ("shell", "bash"):
                code, output = await self.shell(str(args["command"]), int(args.get("timeout_s", 120)))
                if call.name == "bash":
                    return f"<returncode>{code}</returncode>\n<output>\n{output}</output>", False
                return f"[exit {code}]\n{output}", False
            handler = getattr(self, f"tool_{call.name}", None)
            if handler is None:
                return f"unknown tool {call.name!r}", True
            return handler(**args), False
        except (OSError, ValueError, KeyError, TypeError, re.error) as err:
            return f"{type(err).__name__}: {err}", True

    async def shell(self, command: str, timeout_s: int) -> tuple[int, str]:
        pipe = asyncio.subprocess
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=self.root, env=self.env,
            stdin=pipe.DEVNULL, stdout=pipe.PIPE, stderr=pipe.STDOUT,
        )  # fmt: skip
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            return 124, f"timed out after {timeout_s} s\n"
        return process.returncode or 0, output.decode(errors="replace")

    def _path(self, path: str) -> Path:
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise ValueError(f"{path} is outside the workspace")
        return target

    def tool_read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Numbered lines; with a `read_limit`, as many as fit in that many characters, then a last
        line saying where to go on from, as hilbert's read_file does."""
        lines = self._path(path).read_text().splitlines()
        first = max(start_line or 1, 1)
        last = min(end_line or len(lines), len(lines))
        shown: list[str] = []
        room = self.read_limit or float("inf")
        for n in range(first, last + 1):
            text = f"{n:>6}\t{lines[n - 1]}"
            if len(text) > room and shown:
                shown.append(
                    f"[lines {first:,}–{n - 1:,} of {len(lines):,} shown; call read_file with start_line={n}]"
                )
                break
            shown.append(text)
            room -= len(text) + 1
        return "\n".join(shown)

    def tool_write_file(self, path: str, content: str) -> str:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        return f"wrote {target.write_text(content)} bytes to {path}"

    def tool_edit_file(self, path: str, old: str, new: str) -> str:
        target = self._path(path)
        text = target.read_text()
        if (count := text.count(old)) != 1:
            raise ValueError(f"old text found {count} times in {path}; it must occur exactly once")
        target.write_text(text.replace(old, new))
        return f"edited {path}"

    def tool_list_files(self, pattern: str = "**/*") -> str:
        return "\n".join(sorted(self._relative(p) for p in self.root.glob(pattern) if self._visible(p)))

    def tool_grep(self, pattern: str, path: str = ".", glob: str | None = None) -> str:
        regex, base = re.compile(pattern), self._path(path)
        files = [base] if base.is_file() else sorted(base.rglob(glob or "*"))
        hits = []
        for file in (f for f in files if self._visible(f)):
            for n, line in enumerate(file.read_text(errors="replace").splitlines(), start=1):
                if regex.search(line):
                    hits.append(f"{self._relative(file)}:{n}:{line}")
        return "\n".join(hits)

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _visible(self, path: Path) -> bool:
        parts = path.relative_to(self.root).parts
        return path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in parts)


def tool_arguments(messages: tuple[Message, ...], name: str) -> list[dict[str, Any]]:
    """The arguments of every call to tool `name` in a conversation (for assertions)."""
    return [call.arguments for m in messages for call in m.tool_calls if call.name == name]
