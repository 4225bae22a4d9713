"""Running one shell command for an agent, and keeping long outputs in bounds.

`run_command` starts `bash -c COMMAND` in its own process group, reads its output as it comes, and
on exit or timeout kills the whole group, so neither a hung command nor a background child outlives
the tool call (a child that starts its own session escapes; the sandbox is a later issue's). Output
read before a timeout is kept.

`Output` keeps memory bounded whatever a command prints: the first and last `keep` bytes stay in
memory, and once the output is longer than both, all of it (up to `max_saved` bytes) is written to a
file the agent can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

DRAIN_S = 1.0  # how long to keep reading after the command exited (background children may hold the pipe)


class Output:
    """Collects bytes with bounded memory; `render()` gives what the model sees."""

    def __init__(self, keep: int, spill: Callable[[], Path | None], max_saved: int = 20_000_000) -> None:
        self.keep, self.spill, self.max_saved = keep, spill, max_saved
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.saved: Path | None = None
        self.saved_bytes = 0
        self._file: IO[bytes] | None = None

    def add(self, chunk: bytes) -> None:
        before = self.total
        self.total += len(chunk)
        room = max(0, self.keep - len(self.head))
        self.head += chunk[:room]
        rest = chunk[room:]
        limit = 2 * self.keep
        if before <= limit < self.total:  # from now on the output is cut: save all of it
            self.saved = self.spill()
            self._file = self.saved.open("wb") if self.saved else None
            self._write(bytes(self.head) + bytes(self.tail) + rest)  # the tail is still whole here
        elif self.total > limit:
            self._write(chunk)
        if rest:
            self.tail = (self.tail + rest)[-self.keep :]

    def _write(self, data: bytes) -> None:
        if self._file and self.saved_bytes < self.max_saved:
            piece = data[: self.max_saved - self.saved_bytes]
            self._file.write(piece)
            self.saved_bytes += len(piece)

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None

    def render(self, root: Path) -> str:
        self.close()
        head = self.head.decode(errors="replace")
        if self.total <= 2 * self.keep:
            return head + self.tail.decode(errors="replace")
        more = self.total - len(self.head) - len(self.tail)
        if self.saved is None:
            where = "not saved: .hilbert/ is not a folder inside the workspace"
        else:
            rel = self.saved.relative_to(root.resolve()).as_posix()
            cut = f" (cut at {self.max_saved:,} bytes)" if self.saved_bytes >= self.max_saved else ""
            where = f"the whole output is in {rel}{cut}"
        return f"{head}\n[... {more:,} more bytes; {where}]\n{self.tail.decode(errors='replace')}"


@dataclass(frozen=True)
class Limits:
    """Per-command resource limits (None: no limit), applied with setrlimit in the child: CPU seconds
    (the kernel kills it past that) and address space in MiB (allocations past it fail)."""

    cpu_s: int | None = None
    memory_mb: int | None = None

    def apply(self) -> None:  # runs in the child between fork and exec
        if self.cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s + 1))
        if self.memory_mb is not None:
            size = self.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when it timed out
    output: Output


async def run_command(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    output: Output,
    limits: Limits | None = None,
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> CommandResult:
    """Run `bash -c command` (through `wrap`, e.g. a sandbox, when given) and collect its output."""
    # The output goes through a pipe of our own rather than asyncio's: asyncio's `wait()` would also
    # wait for its pipe to close, which a background child (even one in a new session) can hold open
    # forever. With our own pipe, waiting is for the command alone and we close the pipe ourselves.
    read_fd, write_fd = os.pipe()
    try:
        argv = ["bash", "-c", command]
        proc = await asyncio.create_subprocess_exec(
            *(wrap(argv) if wrap else argv),
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            preexec_fn=limits.apply if limits and limits != Limits() else None,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    reader = asyncio.StreamReader()
    pipe_file = os.fdopen(read_fd, "rb", buffering=0)
    pipe: asyncio.BaseTransport | None = None
    pumping: asyncio.Task[None] | None = None
    try:  # from here on, however this ends (cancelled included), the group is killed and reaped
        pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe_file
        )

        async def pump() -> None:
            while chunk := await reader.read(65536):
                output.add(chunk)

        pumping = asyncio.create_task(pump())
        try:
            exit_code: int | None = await asyncio.wait_for(proc.wait(), timeout_s)
            await asyncio.wait({pumping}, timeout=DRAIN_S)  # its last words, unless a child holds the pipe
        except TimeoutError:
            exit_code = None
    finally:
        _kill_group(proc.pid)
        if proc.returncode is None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
        if pumping is not None:
            await asyncio.wait({pumping}, timeout=0.1)
            pumping.cancel()
            await asyncio.gather(pumping, return_exceptions=True)
        if pipe is not None:
            pipe.close()
        else:
            pipe_file.close()
        output.close()
    return CommandResult(exit_code, output)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group may be gone already
        os.killpg(pgid, signal.SIGKILL)
