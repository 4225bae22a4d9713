"""Dialects for third-party coding agents driven against the fake server: Claude Code, Codex CLI and
mini-swe-agent here, aider in `aider.py`; `DETECTORS` lists them for `dialects/__init__.py`.

What each client offers and answers (checked against the pinned versions in `tools/`):

- Claude Code 2.1.197 (Anthropic Messages): `Bash {command, description}` answers the output, or
  `Exit code N` + output with `is_error` when N != 0, or `(Bash completed with no output)`;
  `Read {file_path}` answers `N<TAB>line` lines, or `Wasted call ...` when the file did not change
  since an earlier Read; `Edit {file_path, old_string, new_string}` refuses a file not Read first (or
  changed since); `Write {file_path, content}`. No Grep/Glob tools in this version: those go through
  Bash. Paths are made absolute from the `Primary working directory:` line of the system prompt.
- Codex CLI 0.171.0 (OpenAI Responses): `exec_command {cmd, login, yield_time_ms, ...}` answers a
  header (`Process exited with code N`, ...) then `Output:` and the output. `login` defaults to a login
  shell, whose /etc/profile resets PATH, so commands ask for `login: false`. `apply_patch` is a
  freeform (custom) tool, offered only for model names Codex knows (e.g. `gpt-5.5`); its answer is
  `Exit code: N` ... `Output:` ..., or `apply_patch verification failed: ...`.
- mini-swe-agent 2.4.6 (OpenAI Chat, not streamed): one `bash {command}` tool, rendered as the bash
  dialect does; its answers are JSON `{"returncode": N, "output": "..."}` (or `output_head` /
  `output_tail` when long); it stops on `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` run alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
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
from hilbert.sim.engineer.dialects import aider, bash
from hilbert.sim.engineer.dialects.base import Dialect, command_observation, string_param
from hilbert.testing.fake_server.responder import Conversation, Reply

_CWD = re.compile(r"^\s*-?\s*Primary working directory:\s*(\S.*?)\s*$", re.MULTILINE)
_EXIT_LINE = re.compile(r"^Exit code (-?\d+)\n?")
_WASTED = "Wasted call"
_NO_OUTPUT = "(Bash completed with no output)"


def _text_reply(action: Say | Finish) -> Reply:
    if isinstance(action, Say):
        return Reply(text=action.text)
    return Reply(text=f"{action.claim}\n\nEvidence:\n{action.evidence}")


def _notes(notes: Sequence[Message]) -> tuple[str, ...]:
    return tuple(m.content for m in notes)


# --- Claude Code -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaudeCodeDialect:
    """Claude Code's own tools: Bash, Read, Edit, Write. Holds the conversation so that a Read that
    Claude Code answers with `Wasted call` can be answered from the earlier Read of that file."""

    cwd: str
    conversation: Conversation
    name: str = "claude-code"

    def path(self, path: str) -> str:
        if not self.cwd or PurePosixPath(path).is_absolute():
            return path
        return str(PurePosixPath(self.cwd) / path)

    def render(self, action: Action, call_id: str) -> Reply:
        if isinstance(action, Say | Finish):
            return _text_reply(action)
        name, arguments = self._call(action)
        return Reply(text=action.why, tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))

    def _call(self, action: Run | Read | Grep | ListFiles | Edit | Write) -> tuple[str, dict[str, Any]]:
        match action:
            case Read(path=path, start=start, end=end):
                window = {"offset": start, "limit": (end - (start or 1) + 1) if end else None}
                return "Read", {"file_path": self.path(path), **{k: v for k, v in window.items() if v}}
            case Edit(path=path, old=old, new=new):
                return "Edit", {"file_path": self.path(path), "old_string": old, "new_string": new}
            case Write(path=path, content=content):
                return "Write", {"file_path": self.path(path), "content": content}
            case Run(command=command, why=why):
                return "Bash", {"command": command, "description": (why or "Run a command")[:80]}
        command = bash.BashDialect("Bash").command(action)  # no Grep/Glob tools in this version
        return "Bash", {"command": command, "description": (action.why or "Search")[:80]}

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        if not results:
            return Observation(text="", ok=False, notes=_notes(notes))
        result = results[-1]
        text, exit_code = result.content, None
        if result.name == "Bash":
            if match := _EXIT_LINE.match(text):
                exit_code, text = int(match.group(1)), text[match.end() :]
            elif not result.is_error:
                exit_code, text = 0, "" if text.strip() == _NO_OUTPUT else text
        elif result.name == "Read" and text.startswith(_WASTED):
            text = self._earlier_read(result.tool_call_id) or text
        ok = not result.is_error or exit_code is not None  # a command that failed still answered
        return Observation(text=text, ok=ok, exit_code=exit_code, notes=_notes(notes))

    def _earlier_read(self, call_id: str | None) -> str | None:
        """The last full answer to a Read of the same file before the call `call_id`."""
        calls: dict[str, ToolCall] = {}
        answers: list[tuple[ToolCall, str]] = []
        for message in self.conversation.messages:
            calls.update((c.id, c) for c in message.tool_calls)
            call = calls.get(message.tool_call_id or "")
            if message.role != "tool" or call is None or call.name != "Read":
                continue
            if message.tool_call_id == call_id:
                wanted = self.path(str(call.arguments.get("file_path", "")))
                for earlier, text in reversed(answers):
                    if self.path(str(earlier.arguments.get("file_path", ""))) == wanted:
                        return text
                return None
            if not message.is_error and not message.content.startswith(_WASTED):
                answers.append((call, message.content))
        return None


def detect_claude_code(conversation: Conversation) -> ClaudeCodeDialect | None:
    names = {tool.name for tool in conversation.tools}
    if not {"Bash", "Read", "Edit"} <= names:
        return None
    cwd = _CWD.search(conversation.system)
    return ClaudeCodeDialect(cwd.group(1) if cwd else "", conversation)


# --- Codex CLI ---------------------------------------------------------------------------------

_CODEX_EXIT = re.compile(r"^(?:Process exited with code|Exit code:)\s*(-?\d+)\s*$", re.MULTILINE)
_CODEX_OUTPUT = "\nOutput:\n"
_PATCH_FAILED = "apply_patch verification failed"


def apply_patch_text(path: str, old: str, new: str) -> str:
    """An `apply_patch` patch that replaces the whole lines `old` with `new` in `path` (the engineer's
    edits are whole lines, see `repairs.unique_edit`)."""
    removed = "".join(f"-{line}\n" for line in old.split("\n"))
    added = "".join(f"+{line}\n" for line in new.split("\n")) if new else ""
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n{removed}{added}*** End Patch\n"


@dataclass(frozen=True)
class CodexDialect:
    """Codex's `exec_command` for commands, reads and searches; `apply_patch` for edits when offered."""

    shell: str
    patch_tool: str | None
    name: str = "codex"

    def render(self, action: Action, call_id: str) -> Reply:
        if isinstance(action, Say | Finish):
            return _text_reply(action)
        if isinstance(action, Edit) and self.patch_tool is not None:
            patch = apply_patch_text(action.path, action.old, action.new)
            call = ToolCall(id=call_id, name=self.patch_tool, raw_arguments=patch)
        else:
            command = (
                action.command if isinstance(action, Run) else bash.BashDialect(self.shell).command(action)
            )
            arguments = {"cmd": command, "login": False, "yield_time_ms": 30000, "max_output_tokens": 20000}
            call = ToolCall(id=call_id, name=self.shell, arguments=arguments)
        return Reply(text=action.why, tool_calls=(call,))

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        text = "\n".join(m.content for m in results)
        if not results or text.startswith(_PATCH_FAILED):
            return Observation(text=text, ok=False, notes=_notes(notes))
        header, found, output = text.partition(_CODEX_OUTPUT)
        if not found:
            return command_observation(results, notes)
        exit_line = _CODEX_EXIT.search(header)
        exit_code = int(exit_line.group(1)) if exit_line else None
        return Observation(text=output, ok=exit_line is not None, exit_code=exit_code, notes=_notes(notes))


def detect_codex(conversation: Conversation) -> CodexDialect | None:
    tools = {tool.name: tool for tool in conversation.tools}
    shell = tools.get("exec_command")
    if shell is None or not string_param(shell, "cmd"):
        return None
    patch = tools.get("apply_patch")
    return CodexDialect("exec_command", "apply_patch" if patch is not None else None)


# --- mini-swe-agent ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MiniSweAgentDialect:
    """The bash dialect's commands, with mini-swe-agent 2.x's JSON observations read back."""

    shell: bash.BashDialect
    name: str = "mini-swe-agent"

    def render(self, action: Action, call_id: str) -> Reply:
        return self.shell.render(action, call_id)

    def observe(self, results: Sequence[Message], notes: Sequence[Message]) -> Observation:
        try:
            answer = json.loads("\n".join(m.content for m in results))
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "returncode" not in answer:
            return command_observation(results, notes)
        if "output" in answer:
            text = str(answer["output"])
        else:
            head, tail = answer.get("output_head", ""), answer.get("output_tail", "")
            text = f"{head}\n[... {answer.get('elided_chars', 'some')} characters elided ...]\n{tail}"
        if info := answer.get("exception_info"):
            text = f"{text}\n{info}" if text else str(info)
        code = answer["returncode"]
        exit_code = int(code) if isinstance(code, int | str) and str(code).lstrip("-").isdigit() else None
        return Observation(
            text=text, ok=not any(m.is_error for m in results), exit_code=exit_code, notes=_notes(notes)
        )


def detect_mini_swe_agent(conversation: Conversation) -> MiniSweAgentDialect | None:
    shell = bash.detect(conversation)
    if shell is None or not shell.submit:
        return None
    return MiniSweAgentDialect(shell)


Detector = Callable[[Conversation], Dialect | None]
DETECTORS: dict[str, Detector] = {
    "claude-code": detect_claude_code,
    "codex": detect_codex,
    "mini-swe-agent": detect_mini_swe_agent,
    "aider": aider.detect,
}
