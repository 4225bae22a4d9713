"""Running one shell command for an agent, and keeping long outputs in bounds.

`run_command` starts `bash -c COMMAND` in its own process group, reads its output as it comes, and
on exit or timeout kills the whole group, so neither a hung command nor a background child outlives
the tool call (a child that starts its own session escapes; the sandbox is a later issue's). Output
read before a timeout is kept.

`Output` keeps memory bounded whatever a command prints: the first and last `keep` characters stay
in memory, and once the output is longer than that, all of it (up to `max_saved` bytes) is written
to a file the agent can read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
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
        first_spill = self.total <= self.keep < self.total + len(chunk)
        self.total += len(chunk)
        room = max(0, self.keep - len(self.head))
        self.head += chunk[:room]
        rest = chunk[room:]
        if rest:
            self.tail = (self.tail + rest)[-self.keep :]
        if first_spill:  # everything so far is the head plus the rest of this chunk
            self.saved = self.spill()
            self._file = self.saved.open("wb") if self.saved else None
            self._write(bytes(self.head) + rest)
        elif self.total > self.keep:
            self._write(chunk)

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
        if self.total <= self.keep:
            return head
        more = self.total - len(self.head) - len(self.tail)
        if self.saved is None:
            where = "not saved: .hilbert/ is not a folder inside the workspace"
        else:
            rel = self.saved.relative_to(root.resolve()).as_posix()
            cut = f" (cut at {self.max_saved:,} bytes)" if self.saved_bytes >= self.max_saved else ""
            where = f"the whole output is in {rel}{cut}"
        skipped = f"[... {more:,} more bytes; {where}]\n" if more > 0 else ""
        return f"{head}\n{skipped}{self.tail.decode(errors='replace')}"


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None  # None when it timed out
    output: Output


async def run_command(
    command: str, *, cwd: Path, env: Mapping[str, str], timeout_s: float, output: Output
) -> CommandResult:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            output.add(chunk)

    async def exited() -> int:
        # Not just proc.wait(): it also waits for the pipe to close, which a background child may hold.
        while proc.returncode is None:
            if (await asyncio.wait({reader}, timeout=0.05))[0]:
                return await proc.wait()
        await asyncio.wait({reader}, timeout=DRAIN_S)
        return proc.returncode

    reader = asyncio.create_task(pump())
    try:
        exit_code: int | None = await asyncio.wait_for(exited(), timeout_s)
    except TimeoutError:
        exit_code = None
    finally:
        _kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
        await asyncio.wait({reader}, timeout=DRAIN_S)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        output.close()
    return CommandResult(exit_code, output)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group may be gone already
        os.killpg(pgid, signal.SIGKILL)
