"""The one place hilbert starts a process, and the bounded output of a command.

`run_process(argv, ...)` starts `argv` in its own process group, feeds it `stdin`, reads its output
through pipes of our own as it comes, and however it ends — exit, timeout, cancellation — kills the
whole group and reaps it, so neither a hung command nor a background child outlives the call. A child
that starts its own session or is double-forked leaves the group; with `Limits` it is killed with the
rest even so: by its control group (`Limits.groups`, `hilbert.commands.groups`) where one was made,
otherwise by the subreaper the command then runs under (`hilbert.commands.reaper`), which is asked to
end it all with SIGTERM on a timeout or a cancellation. Output read before a timeout is kept. Every spawner
of hilbert goes through it: the command runner (`hilbert.commands.runner`: workers' and the lead's
shell, the stop gate, the merge checks) and the harness's git (`hilbert.workspaces.git`).

`Output` keeps memory bounded whatever a command prints: the first and last `keep` bytes stay in
memory, and once the output is longer than both, all of it (up to `max_saved` bytes) is written to a
file the agent can read — one its `spill` opened (the agent's toolbox: outside the workspace, where a
command still running cannot swap it) and names as the agent reads it. `Limits` are the per-command
resource limits set in the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import hilbert.commands.reaper as reaper
from hilbert.commands.groups import CommandGroup, CommandGroups

DRAIN_S = 1.0  # how long to keep reading after the command exited (background children may hold the pipe)
REAPER_GRACE_S = 5.0  # how long the subreaper has to kill and reap everything once told to, before SIGKILL


Spill = Callable[[], tuple[IO[bytes], str] | None]  # a new file opened for writing, and its name


class Output:
    """Collects bytes with bounded memory; `render()` gives what the model sees."""

    def __init__(self, keep: int, spill: Spill | None = None, max_saved: int = 20_000_000) -> None:
        """Keep `keep` bytes at each end; past that, all of it goes to the file `spill()` opens, which
        `render` names as `spill` said (None, or a spill that returns None: the middle is dropped, as
        for the harness's own checks, whose ends are what counts)."""
        self.keep, self.spill, self.max_saved = keep, spill, max_saved
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.saved: str | None = None
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
            opened = self.spill() if self.spill else None
            self._file, self.saved = opened if opened else (None, None)
            self._write(bytes(self.head) + bytes(self.tail) + rest)  # the tail is still whole here
        elif self.total > limit:
            self._write(chunk)
        if rest:  # trimmed only once it doubles: each byte is copied a bounded number of times
            self.tail += rest
            if len(self.tail) > 2 * self.keep:
                del self.tail[: -self.keep]

    def _write(self, data: bytes) -> None:
        if self._file and self.saved_bytes < self.max_saved:
            piece = data[: self.max_saved - self.saved_bytes]
            self._file.write(piece)
            self.saved_bytes += len(piece)

    def close(self) -> None:
        if self._file:
            self._file.close()
            self._file = None

    def render(self) -> str:
        self.close()
        head = self.head.decode(errors="replace")
        if self.total <= 2 * self.keep:
            return head + self.tail.decode(errors="replace")
        tail = self.tail[-self.keep :]
        more = self.total - len(self.head) - len(tail)
        if self.spill is None:
            where = "the middle is not kept"
        elif self.saved is None:
            where = "the whole output could not be saved"
        else:
            cut = f" (cut at {self.max_saved:,} bytes)" if self.saved_bytes >= self.max_saved else ""
            where = f"the whole output is in {self.saved}{cut}"
        return f"{head}\n[... {more:,} more bytes; {where}]\n{tail.decode(errors='replace')}"


@dataclass(frozen=True)
class Limits:
    """Per-command resource limits (None: no limit). With setrlimit in the child: CPU seconds (the
    kernel kills it past that), address space in MiB (allocations past it fail), the size of a file
    it writes in MiB (a write past it fails). Through a control group of its own (`groups`, where the
    machine allows one: `hilbert.commands.groups`): how many processes it may have at once
    (`processes`), how much memory all of them may use (`group_memory_mb`), and none outliving it.
    Without a group none outlives it either (`hilbert.commands.reaper`), but neither cap holds."""

    cpu_s: int | None = None
    memory_mb: int | None = None
    file_mb: int | None = None
    processes: int | None = None
    group_memory_mb: int | None = None
    groups: CommandGroups | None = None

    def apply(self) -> None:  # runs in the child between fork and exec
        if self.cpu_s is not None:
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_s, self.cpu_s + 1))
        if self.memory_mb is not None:
            size = self.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if self.file_mb is not None:
            size = self.file_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    def group(self) -> CommandGroup | None:
        """A fresh control group for one command, or None where there is none to make."""
        if self.groups is None or not self.groups.parents:
            return None
        return self.groups.new(processes=self.processes, memory_mb=self.group_memory_mb)


Sink = Callable[[bytes], None]
Waiting = tuple[float, Callable[[float], None]]  # (every_s, call(elapsed_s))


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | None,
    env: Mapping[str, str],
    timeout_s: float | None,
    stdout: Sink,
    stderr: Sink | None = None,
    stdin: bytes | None = None,
    limits: Limits | None = None,
    drain_s: float = DRAIN_S,
    waiting: Waiting | None = None,
    pass_fds: Sequence[int] = (),
) -> int | None:
    """Run `argv`; its output goes to `stdout` as it comes (`stderr` too, unless a sink of its own is
    given). Returns the exit status (negative: killed by that signal), or None when it ran past
    `timeout_s`. `waiting = (every_s, call)` calls `call(elapsed_s)` every `every_s` seconds while it
    runs. `pass_fds`: descriptors it inherits (no other is). Raises FileNotFoundError when the
    program is missing."""
    group = limits.group() if limits else None
    reaped = limits is not None and group is None  # no group to end what it leaves: the subreaper does
    if reaped:
        _must_exist(argv[0], cwd, env)
        argv = [sys.executable, "-I", "-S", reaper.__file__, "--", *argv]
    preexec = _preexec(limits, group, reaped)
    pipes = [os.pipe() for _ in range(1 if stderr is None else 2)]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=pipes[0][1],
            stderr=pipes[-1][1],
            start_new_session=True,
            preexec_fn=preexec,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        for read_fd, _ in pipes:
            os.close(read_fd)
        if group is not None:
            group.close()
        raise
    finally:
        for _, write_fd in pipes:
            os.close(write_fd)
    # The output goes through pipes of our own rather than asyncio's: asyncio's `wait()` would also
    # wait for its pipes to close, which a background child (even one in a new session) can hold open
    # forever. With our own pipes, waiting is for the command alone and we close the pipes ourselves.
    loop = asyncio.get_running_loop()
    files = [os.fdopen(read_fd, "rb", buffering=0) for read_fd, _ in pipes]
    transports: list[asyncio.BaseTransport] = []
    tasks: list[asyncio.Task[None]] = []  # the pumps, then the stdin feeder
    try:  # from here on, however this ends (cancelled included), the group is killed and reaped
        sinks = [stdout] if stderr is None else [stdout, stderr]
        for file, sink in zip(files, sinks, strict=True):
            reader = asyncio.StreamReader()
            transports.append(await _connect(loop, reader, file))
            tasks.append(asyncio.create_task(_pump(reader, sink)))
        pumps = list(tasks)
        if stdin is not None and proc.stdin is not None:  # fed while the timeout runs
            tasks.append(asyncio.create_task(_feed(proc.stdin, stdin)))
        try:
            exit_code: int | None = await asyncio.wait_for(_wait(proc, waiting), timeout_s)
            await asyncio.wait(pumps, timeout=drain_s)  # its last words, unless a child holds the pipe
        except TimeoutError:
            exit_code = None
    finally:
        await _finish(proc, tasks, transports, files[len(transports) :], group, reaped)
    return exit_code


def _must_exist(program: str, cwd: Path | None, env: Mapping[str, str]) -> None:
    """FileNotFoundError for a program that is not there, as starting it directly would raise."""
    found = (
        os.access(Path(cwd or ".") / program, os.X_OK)
        if "/" in program
        else shutil.which(program, path=env.get("PATH", os.defpath)) is not None
    )
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


def _preexec(
    limits: Limits | None, group: CommandGroup | None, reaped: bool = False
) -> Callable[[], None] | None:
    """What the child runs between fork and exec: become the subreaper or join its group, then set
    its rlimits (inherited by the command the subreaper starts)."""
    if group is None and not reaped and (limits is None or _no_rlimits(limits)):
        return None
    subreaper = reaper.subreaper_flag() if reaped else None  # prepared here, before the fork

    def preexec() -> None:
        if subreaper is not None:
            subreaper()
        if group is not None:
            group.join()
        if limits is not None:
            limits.apply()

    return preexec


def _no_rlimits(limits: Limits) -> bool:
    return limits.cpu_s is None and limits.memory_mb is None and limits.file_mb is None


async def _connect(
    loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, file: IO[bytes]
) -> asyncio.BaseTransport:
    pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), file)
    return pipe


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
    pipe.close()


async def _finish(
    proc: asyncio.subprocess.Process,
    tasks: list[asyncio.Task[None]],
    transports: list[asyncio.BaseTransport],
    files: Sequence[IO[bytes]],
    group: CommandGroup | None = None,
    reaped: bool = False,
) -> None:
    """Kill the group, reap it, stop reading and close every pipe: in a task of its own, finished
    however often the caller is cancelled meanwhile (and the caller's cancellation is passed on). A
    subreaper still running is first told to end everything below it (SIGTERM), and given time to."""

    async def cleanup() -> None:
        if reaped and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), REAPER_GRACE_S)
        _kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
        if group is not None:  # what left the process group (setsid, a double fork) dies here
            await asyncio.to_thread(group.close)
        if tasks:
            await asyncio.wait(tasks, timeout=0.1)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for opened in transports:
            opened.close()
        for file in files:
            file.close()

    done = asyncio.ensure_future(cleanup())
    cancelled = False
    while not done.done():
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            cancelled = True
    done.result()
    if cancelled:
        raise asyncio.CancelledError


async def _pump(reader: asyncio.StreamReader, sink: Sink) -> None:
    while chunk := await reader.read(65536):
        sink(chunk)


async def _wait(
    proc: asyncio.subprocess.Process, waiting: tuple[float, Callable[[float], None]] | None
) -> int:
    if waiting is None:
        return await proc.wait()
    every, call = waiting
    start = time.monotonic()
    done = asyncio.ensure_future(proc.wait())
    try:
        while not (await asyncio.wait({done}, timeout=every))[0]:
            call(time.monotonic() - start)
        return done.result()
    finally:
        done.cancel()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group may be gone already
        os.killpg(pgid, signal.SIGKILL)
