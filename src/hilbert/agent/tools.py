"""The agent's tools, all confined to its workspace.

`ToolBox(workspace)` offers: read_file, write_file, edit_file, list_files, grep, shell, and `finish`
(whose call the loop handles: it ends the run with a claim and evidence). `ToolBox.run(call)` never
raises for a bad call: a refused path, a missing file, a non-unique edit or malformed arguments come
back as an error result the model can read and act on.

The file tools behave as a model trained on other agents' tools expects: `list_files` and `grep` take
globs by ripgrep's rules (`*.py` matches at any depth; see `hilbert.agent.globs`), and `read_file`
answers whole, numbered lines up to `max_output_chars`, ending — when more remain — with
`[lines 1–312 of 1,040 shown; call read_file with start_line=313]`; it never saves a copy.

Shell commands go through the `Runner` the toolbox is given (`hilbert.commands.runner`, built once at
the edge): the command policy reads each first, then it runs in the runner's sandbox with the
workspace the one writable folder, its environment (no keys, no agent sockets), limits, command slots
and `timeouts.shell_s` (a model may ask for less); a refusal is the tool error. Output beyond
`max_output_chars` is cut to its head and tail, and the whole output is saved to a file the agent can
read with read_file and grep as `.hilbert/outputs/output-<n>.txt` (`hilbert.commands.process.Output`).

Every file is opened beneath its folder (`hilbert.agent.paths.Folder`: openat2 with `RESOLVE_BENEATH`,
or an `O_NOFOLLOW` walk), never checked by name and opened later, so nothing a worker's process plants
or swaps meanwhile leads the tools — which run outside the sandbox — out of the workspace; symlinks
that stay inside work. The saved outputs are not in the workspace at all (a command still running
there could otherwise swap the file under the harness's writes): they live in `outputs`, a folder
outside it that the sandbox hides (the fleet's: `<run folder>/outputs/<worker>`; by default a private
temporary folder), and the tools map the path `.hilbert/outputs/<name>` — and only that — to it;
they are read-only to the agent, and shell commands cannot see them.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import stat
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from hilbert.agent.globs import glob_matcher, walk
from hilbert.agent.paths import READ, Folder, ToolRefused
from hilbert.commands.process import Output
from hilbert.commands.runner import Runner, shell_timeout
from hilbert.models.types import ToolCall, ToolSpec
from hilbert.security.scope import ToolScope

FINISH = "finish"
OUTPUTS = ".hilbert/outputs"  # how the agent names the folder its long outputs are saved in


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False


def _clip(line: str, limit: int = 300) -> str:
    return line if len(line) <= limit else f"{line[:limit]}… [{len(line) - limit} more chars]"


def _lines(text: str) -> list[str]:
    """`text`'s lines as read_file numbers them: split at newlines only (`str.splitlines` also splits
    at form feeds and other separators, and grep's line numbers would then disagree with read_file's)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def read_finish(call: ToolCall) -> tuple[str, str] | ToolOutcome:
    """The claim and evidence of a `finish` call, or the tool error to answer a malformed one with."""
    args = call.arguments
    claim, evidence = args.get("claim"), args.get("evidence")
    if call.raw_arguments is not None or not isinstance(claim, str) or not isinstance(evidence, str):
        return ToolOutcome("finish needs {claim: string, evidence: string}; you are not finished yet", True)
    if not claim.strip() or not evidence.strip():
        return ToolOutcome("finish needs a claim (what you did) and evidence (what shows it works)", True)
    return claim, evidence


def _spec(name: str, description: str, required: list[str], **props: Any) -> ToolSpec:
    schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return ToolSpec(name, description, schema)


_STR = {"type": "string"}
GLOB_RULES = (
    "Globs work as in ripgrep: `*.py` matches at any depth; a glob with `/` is anchored at the "
    "workspace root (`src/**/*.py`); `**` spans folders; `{py,pyi}` either."
)
_INT = {"type": "integer"}

TOOL_SPECS: tuple[ToolSpec, ...] = (
    _spec(
        "read_file",
        "Read a text file, with line numbers; optional 1-based inclusive line range. A long file comes "
        "back in whole lines up to a size limit, ending with the start_line to call again with.",
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
    _spec(
        "list_files",
        f"List the files matching a glob (default: all). {GLOB_RULES}",
        [],
        pattern=_STR,
    ),
    _spec(
        "grep",
        "Search files for a Python regular expression; prints path:line:text. `path`: a file or folder "
        f"to search (default: all). `glob` picks the files: {GLOB_RULES}",
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


class Tools(Protocol):
    """What the loop needs of an agent's tools: the workspace, the specs offered, and running a call
    (never raising for a bad call). `ToolBox` is the worker's set; the lead's planning tools are another."""

    root: Path

    def specs(self) -> tuple[ToolSpec, ...]: ...

    async def run(self, call: ToolCall) -> ToolOutcome: ...


class ScopedTools:
    """`inner`'s tools within a task's `scope` (`hilbert.security.scope`): only the scope's tools are
    offered, and every call is checked against it before it runs; a refusal is the tool error the model
    reads (and the log records). `finish` is always allowed."""

    def __init__(self, inner: Tools, scope: ToolScope) -> None:
        self.inner, self.scope, self.root = inner, scope, inner.root

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(s for s in self.inner.specs() if s.name == FINISH or self.scope.allows_tool(s.name))

    async def run(self, call: ToolCall) -> ToolOutcome:
        refusal = None if call.name == FINISH else self.scope.check(call.name, call.arguments)
        return ToolOutcome(str(refusal), True) if refusal else await self.inner.run(call)


class ToolBox:
    """The tools of one agent, bound to its workspace."""

    def __init__(
        self,
        workspace: Path,
        *,
        runner: Runner,
        max_output_chars: int = 12_000,
        max_results: int = 500,
        outputs: Path | None = None,
        use_openat2: bool = True,
    ) -> None:
        """`runner` runs the shell tool's commands (its sandbox, policy, environment, limits, slots and
        shell timeout), with this workspace the one writable folder. `outputs`: the folder long
        outputs are saved in, outside the workspace and hidden by the sandbox (made when first
        needed; None: a private temporary folder, removed with the toolbox). `use_openat2=False`
        opens files with the `O_NOFOLLOW` walk even where the kernel has openat2 (for tests)."""
        self.runner = runner
        self.files = Folder(workspace, use_openat2=use_openat2)
        self.root = self.files.root_path
        self.max_output_chars = max_output_chars
        self.max_results = max_results
        self.use_openat2 = use_openat2
        self._outputs_at = outputs
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
            if asyncio.iscoroutinefunction(handler):
                result = await handler(**call.arguments)
            else:  # file tools can be slow on a big tree: keep the event loop (other agents) free
                result = await asyncio.to_thread(handler, **call.arguments)
            return result if isinstance(result, ToolOutcome) else ToolOutcome(str(result))
        except ToolRefused as refused:
            return ToolOutcome(str(refused), True)
        except TypeError as bad_args:
            return ToolOutcome(f"bad arguments for {call.name}: {bad_args}", True)
        except (OSError, UnicodeDecodeError, re.error, ValueError, NotImplementedError) as failure:
            return ToolOutcome(f"{call.name} failed: {failure}", True)

    # -- file tools ---------------------------------------------------------------------------------
    def _locate(self, path: str) -> tuple[Folder, str, str]:
        """The folder a path given by the model lies in, the path relative to it, and the prefix to
        name what is found there by: `.hilbert/outputs/...` is the saved outputs' folder."""
        relative = self.files.relative(path)
        parts = relative.split("/")
        if parts[:2] == OUTPUTS.split("/"):
            return self._outputs_folder(), "/".join(parts[2:]) or ".", f"{OUTPUTS}/"
        return self.files, relative, ""

    def read_file(self, path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Numbered whole lines from `start_line` to `end_line` (1-based, inclusive), as many as fit in
        `max_output_chars`; when not all fit, a last line says which were shown, of how many, and the
        `start_line` to go on from. A first line longer than the cap is clipped (so a call always makes
        progress). Nothing is saved to a file: the file itself is there to be read again."""
        folder, relative, _ = self._locate(path)
        with folder.root() as root:
            fd = folder.open_file(root, relative, READ, path)
        first, last = max(1, start_line or 1), end_line or 0
        shown: list[str] = []
        room, cut, count = self.max_output_chars, False, 0
        with open(fd, encoding="utf-8", errors="replace") as lines:
            for count, line in enumerate(lines, 1):
                if count < first or cut:
                    continue
                if last and count > last:
                    if shown:
                        break
                    continue
                text = f"{count:>6}\t{line.removesuffix(chr(10))}"
                if len(text) > room and shown:
                    cut = True  # keep counting: the footer says how long the file is
                    continue
                if len(text) > room:  # the first line asked for: clipped, so that the call makes progress
                    keep = max(room, 80)
                    text = f"{text[:keep]}… [line clipped: {len(text) - keep:,} more chars]"
                shown.append(text)
                room -= len(text) + 1
        if not shown:
            return f"(no lines in range {first}-{last or 'end'}; the file has {count:,} lines)"
        if cut:
            a, b = first, first + len(shown) - 1
            span = f"line {a:,}" if a == b else f"lines {a:,}–{b:,}"
            shown.append(f"[{span} of {count:,} shown; call read_file with start_line={b + 1}]")
        return "\n".join(shown)

    def _writable(self, path: str) -> str:
        folder, relative, _ = self._locate(path)
        if folder is not self.files:
            raise ToolRefused(f"refused: {path!r} is a saved output, kept as the command wrote it")
        return relative

    def write_file(self, path: str, content: str) -> str:
        relative = self._writable(path)
        data = content.encode()
        with self.files.root() as root:
            self.files.make_parents(root, relative, path)
            fd = self.files.open_file(
                root, relative, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, path
            )
        with open(fd, "wb") as file:
            file.write(data)
        return f"wrote {len(data)} bytes to {relative}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        relative = self._writable(path)
        with self.files.root() as root:
            with open(self.files.open_file(root, relative, READ, path), encoding="utf-8") as file:
                text = file.read()
            if not old:
                raise ToolRefused("edit_file: `old` must not be empty; use write_file to create a file")
            count = text.count(old)
            if count != 1:
                found = (
                    "not found"
                    if count == 0
                    else f"found {count} times; include more context to make it unique"
                )
                raise ToolRefused(f"edit_file: `old` {found} in {path}")
            fd = self.files.open_file(root, relative, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK, path)
        with open(fd, "w", encoding="utf-8") as file:
            file.write(text.replace(old, new, 1))
        return f"edited {relative}"

    def list_files(self, pattern: str = "**/*") -> str:
        with self.files.root() as root:
            found = self._matching(self.files, root, ".", pattern, "list_files")
        return self._limit(found, "files") or "(no files match)"

    def grep(self, pattern: str, path: str = ".", glob: str = "**/*") -> str:
        regex = re.compile(pattern)
        folder, base, prefix = self._locate(path)
        hits: list[str] = []
        with folder.root() as root:
            fd = folder.open(root, base, READ, path)
            try:
                is_file = stat.S_ISREG(os.fstat(fd).st_mode)
            finally:
                os.close(fd)
            files = [base] if is_file else self._matching(folder, root, base, glob, "grep")
            for file in files:
                try:
                    with open(folder.open_file(root, file, READ, file), encoding="utf-8") as opened:
                        text = opened.read()
                except (UnicodeDecodeError, OSError, ToolRefused):
                    if is_file:
                        raise
                    continue
                shown = prefix + file
                hits.extend(
                    f"{shown}:{n}:{_clip(line)}"
                    for n, line in enumerate(_lines(text), 1)
                    if regex.search(line)
                )
                if len(hits) > self.max_results:
                    break
        return self._limit(hits, "matches") or "(no matches)"

    def _matching(self, folder: Folder, root: int, base: str, pattern: str, tool: str) -> list[str]:
        """The files under `base` (relative to `folder`'s root, open as `root`), sorted, that `pattern`
        (ripgrep's rules, see `glob_matcher`) matches by their path relative to `base` or to the root.
        Only files really inside: symlinked folders are not entered, a symlinked file counts only when
        it opens beneath the root as a file; `SKIP_DIRS` (hilbert's and git's own folders, caches) are
        pruned on the way."""
        pattern = pattern.strip()
        while pattern.startswith("./"):
            pattern = pattern[2:]
        if not pattern or Path(pattern).is_absolute() or ".." in pattern.split("/"):
            raise ToolRefused(f"{tool}: the pattern must be relative to the workspace, without '..'")
        matches = glob_matcher(pattern)
        start = folder.open(root, base, os.O_RDONLY | os.O_DIRECTORY, base)
        try:
            under = "" if base == "." else f"{base}/"
            found = [under + file for file in walk(start) if matches(file) or matches(under + file)]
        finally:
            os.close(start)
        return sorted(file for file in found if self._a_file(folder, root, file))

    def _a_file(self, folder: Folder, root: int, relative: str) -> bool:
        """Whether `relative` opens beneath the root as a regular file (a symlink leading out, a loop or
        a dangling link does not)."""
        try:
            fd = folder.open_file(root, relative, READ, relative)
        except (OSError, ToolRefused):
            return False
        os.close(fd)
        return True

    # -- shell --------------------------------------------------------------------------------------
    async def shell(self, command: str, timeout_s: int | None = None) -> ToolOutcome:
        done = await self.runner.run(
            command,
            root=self.root,
            timeout=shell_timeout(self.runner.timeouts, timeout_s),
            output=self._output(),
            screened=True,
        )
        if done.refused is not None:
            return ToolOutcome(done.refused, True)
        text = done.output.render()
        if done.exit_code is None:
            return ToolOutcome(f"[timed out after {done.timeout.describe()}; killed]\n{text}", True)
        if done.exit_code < 0 or done.exit_code - 128 in (signal.SIGXCPU, signal.SIGKILL):
            number = -done.exit_code if done.exit_code < 0 else done.exit_code - 128
            why = " (its CPU-time limit)" if number == signal.SIGXCPU else ""
            return ToolOutcome(
                f"[killed by {signal.Signals(number).name}{why}]\n{done.output.render()}", True
            )
        return ToolOutcome(f"[exit {done.exit_code}]\n{text}")

    # -- output limits ------------------------------------------------------------------------------
    def _output(self) -> Output:
        return Output(self.max_output_chars // 2, self._spill_file)

    def _outputs_folder(self) -> Folder:
        """The folder the whole outputs are saved in (made now if missing): outside the workspace."""
        if self._outputs_at is None:  # removed when the toolbox is
            self._outputs_at = Path(tempfile.mkdtemp(prefix="hilbert-outputs-"))
            weakref.finalize(self, shutil.rmtree, self._outputs_at, ignore_errors=True)
        self._outputs_at.mkdir(mode=0o700, parents=True, exist_ok=True)
        return Folder(self._outputs_at, use_openat2=self.use_openat2)

    def _spill_file(self) -> tuple[IO[bytes], str] | None:
        """A new file for a long output, created exclusively in the outputs folder, and the name the
        agent reads it by (`.hilbert/outputs/output-<n>.txt`); None if it cannot be made."""
        try:
            folder = self._outputs_folder()
            with folder.root() as root:
                while True:  # a toolbox made again for the same worker finds its earlier files there
                    self._outputs += 1
                    name = f"output-{self._outputs}.txt"
                    try:
                        fd = folder.open(root, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, name, 0o600)
                    except FileExistsError:
                        continue
                    return open(fd, "wb"), f"{OUTPUTS}/{name}"
        except (ToolRefused, OSError):
            return None

    def _limit(self, items: list[str], what: str) -> str:
        if len(items) > self.max_results:
            return "\n".join(
                [*items[: self.max_results], f"[... {len(items) - self.max_results} {what} more]"]
            )
        return "\n".join(items)
