"""The agent's tools, all confined to its workspace.

`ToolBox(workspace)` offers: read_file, write_file, edit_file, list_files, grep, shell, and `finish`
(whose call the loop handles: it ends the run with a claim and evidence). `ToolBox.run(call)` never
raises for a bad call: a refused path, a missing file, a non-unique edit or malformed arguments come
back as an error result the model can read and act on.

Shell commands run with the workspace as working directory, a timeout, and the model API keys
removed from their environment. Output beyond `max_output_chars` is cut, and the whole output is
saved under `.hilbert/outputs/` in the workspace so the agent can read it with read_file.
The sandbox (only the workspace writable, no network) is a later issue's `Sandbox.run` seam; until
then shell commands are confined by working directory only.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilbert.agent.paths import ToolRefused, confine, relative
from hilbert.models.types import ToolCall, ToolSpec

FINISH = "finish"
SECRET_ENV = re.compile(r"(API_KEY|AUTH_TOKEN|SECRET|PASSWORD)$")
SKIP_DIRS = {".git", ".hilbert", "__pycache__", ".venv", "node_modules"}


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False


def command_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment commands run with: the given (or current) one without API keys and other
    secrets, and with this interpreter's bin directory first on PATH, so `python` and `pytest` are
    the ones hilbert runs on. No bytecode is written: two same-sized edits within one second would
    otherwise share a stale `.pyc` and a test run could see the old code."""
    clean = {k: v for k, v in (os.environ if env is None else env).items() if not SECRET_ENV.search(k)}
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    clean["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), clean.get("PATH", os.defpath)])
    return clean


def _spec(name: str, description: str, required: list[str], **props: Any) -> ToolSpec:
    schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return ToolSpec(name, description, schema)


_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOL_SPECS: tuple[ToolSpec, ...] = (
    _spec(
        "read_file",
        "Read a text file; optional 1-based inclusive line range.",
        ["path"],
        path=_STR,
        start_line=_INT,
        end_line=_INT,
    ),
    _spec(
        "write_file",
        "Create or overwrite a file with the given content.",
        ["path", "content"],
        path=_STR,
        content=_STR,
    ),
    _spec(
        "edit_file",
        "Replace the unique exact occurrence of `old` with `new` in a file.",
        ["path", "old", "new"],
        path=_STR,
        old=_STR,
        new=_STR,
    ),
    _spec("list_files", "List files matching a glob pattern (default **/*).", [], pattern=_STR),
    _spec(
        "grep",
        "Search files for a Python regular expression; prints path:line:text.",
        ["pattern"],
        pattern=_STR,
        path=_STR,
        glob=_STR,
    ),
    _spec(
        "shell",
        "Run a bash command in the workspace; prints the exit code and output.",
        ["command"],
        command=_STR,
        timeout_s=_INT,
    ),
    _spec(
        "finish",
        "Stop: state what you claim is done and the evidence (e.g. test output).",
        ["claim", "evidence"],
        claim=_STR,
        evidence=_STR,
    ),
)


class ToolBox:
    """The tools of one agent, bound to its workspace."""

    def __init__(
        self,
        workspace: Path,
        *,
        shell_timeout_s: int = 120,
        max_output_chars: int = 12_000,
        max_results: int = 500,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = workspace.resolve()
        self.shell_timeout_s = shell_timeout_s
        self.max_output_chars = max_output_chars
        self.max_results = max_results
        self.env = command_env(env)
        self._outputs = 0
        self._handlers: dict[str, Callable[..., Any]] = {
            "read_file": self.read_file,
            "write_file": self.write_file,
            "edit_file": self.edit_file,
            "list_files": self.list_files,
            "grep": self.grep,
            "shell": self.shell,
        }

    def specs(self) -> tuple[ToolSpec, ...]:
        return TOOL_SPECS

    async def run(self, call: ToolCall) -> ToolOutcome:
        handler = self._handlers.get(call.name)
        if handler is None:
            return ToolOutcome(f"unknown tool {call.name!r}; available: {', '.join(self._handlers)}", True)
        if call.raw_arguments is not None:
            return ToolOutcome(
                f"the arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]}", True
            )
        try:
            result = handler(**call.arguments)
            if asyncio.iscoroutine(result):
                result = await result
            return result if isinstance(result, ToolOutcome) else ToolOutcome(str(result))
        except ToolRefused as refused:
            return ToolOutcome(str(refused), True)
        except TypeError as bad_args:
            return ToolOutcome(f"bad arguments for {call.name}: {bad_args}", True)
        except (OSError, UnicodeDecodeError, re.error) as failure:
            return ToolOutcome(f"{call.name} failed: {failure}", True)

    # -- file tools ---------------------------------------------------------------------------------
    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        target = confine(self.root, path)
        if target.is_dir():
            raise ToolRefused(f"{path} is a directory; use list_files")
        lines = target.read_text().splitlines()
        first = max(1, start_line or 1)
        last = min(len(lines), end_line or len(lines))
        body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(first, last + 1))
        return self._cap(body or f"(no lines in range {first}-{last}; the file has {len(lines)} lines)")

    def write_file(self, path: str, content: str) -> str:
        target = confine(self.root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"wrote {len(content.encode())} bytes to {relative(self.root, target)}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        target = confine(self.root, path)
        text = target.read_text()
        count = text.count(old) if old else 0
        if count != 1:
            found = (
                "not found" if count == 0 else f"found {count} times; include more context to make it unique"
            )
            raise ToolRefused(f"edit_file: `old` {found} in {path}")
        target.write_text(text.replace(old, new, 1))
        return f"edited {relative(self.root, target)}"

    def list_files(self, pattern: str = "**/*") -> str:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolRefused("list_files: the pattern must be relative to the workspace, without '..'")
        found = sorted(
            relative(self.root, p)
            for p in self.root.glob(pattern)
            if p.is_file() and not SKIP_DIRS & set(p.relative_to(self.root).parts)
        )
        return self._limit(found, "files") or "(no files match)"

    def grep(self, pattern: str, path: str = ".", glob: str = "**/*") -> str:
        regex = re.compile(pattern)
        base = confine(self.root, path)
        files = [base] if base.is_file() else sorted(base.glob(glob))
        hits: list[str] = []
        for file in files:
            if not file.is_file() or SKIP_DIRS & set(file.relative_to(self.root).parts):
                continue
            try:
                text = file.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            rel = relative(self.root, file)
            hits.extend(
                f"{rel}:{n}:{line}" for n, line in enumerate(text.splitlines(), 1) if regex.search(line)
            )
            if len(hits) > self.max_results:
                break
        return self._limit(hits, "matches") or "(no matches)"

    # -- shell --------------------------------------------------------------------------------------
    async def shell(self, command: str, timeout_s: int | None = None) -> ToolOutcome:
        timeout = min(timeout_s or self.shell_timeout_s, self.shell_timeout_s)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=self.root,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = await proc.communicate()
            text = out.decode(errors="replace")
            return ToolOutcome(f"[timed out after {timeout}s]\n{self._cap(text)}", True)
        finally:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)
        return ToolOutcome(f"[exit {proc.returncode}]\n{self._cap(out.decode(errors='replace'))}")

    # -- output limits ------------------------------------------------------------------------------
    def _cap(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        self._outputs += 1
        saved = self.root / ".hilbert" / "outputs" / f"output-{os.getpid()}-{self._outputs}.txt"
        saved.parent.mkdir(parents=True, exist_ok=True)
        (self.root / ".hilbert" / ".gitignore").write_text("*\n")
        saved.write_text(text)
        head = self.max_output_chars // 2
        tail = self.max_output_chars - head
        more = len(text) - self.max_output_chars
        return f"{text[:head]}\n[... {more} chars more saved to {relative(self.root, saved)}]\n{text[-tail:]}"

    def _limit(self, items: list[str], what: str) -> str:
        if len(items) > self.max_results:
            return "\n".join(
                [*items[: self.max_results], f"[... {len(items) - self.max_results} {what} more]"]
            )
        return "\n".join(items)
