"""The harness's stopwatch: runs a metric command and reports what it cost and what it printed.
Standard library only, run as a script inside the sandbox (`hilbert.climb.measure` builds the line):

    python -I -S timer.py --report FD --min-cpu SECONDS [--fresh DIR]... -- ARGV...

It runs ARGV as a fresh process (a fresh interpreter: nothing of an earlier run survives but the
files of the tree, which is read-only), again and again until the runs together used `--min-cpu`
seconds of CPU (at least once; at most `MAX_RUNS`, and no more once the loop took `MAX_WALL_S`: a
command that mostly waits is timed well enough by one run and would wait through hundreds), and
writes one JSON object to the descriptor FD:
`runs`, `cpu` (user + system seconds of the whole process tree, per run), `wall` (seconds per run),
`status` (the first non-zero exit status, else 0), `stdout` (the first run's, decoded, at most
`MAX_STDOUT` bytes) and `same` (whether every run gave the same answer: its output without the
number line, the rule of `hilbert.climb.measure.answer_of`, repeated here).

The CPU time is the kernel's, never the command's word for it: `os.wait4` gives each reaped child's
user and system time with that of every descendant it waited for (a process pool's workers count),
and this process is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`), so a process the command
orphans comes here: once the command's own process has exited, whatever still runs below is killed
and reaped, and its time counted too. Work done after exit in a process left behind is not the
command's gain. getrusage reports microseconds; a reading is at least `--min-cpu` (the harness
asks for 50 ms), so the clock's resolution is under 0.002 % of it and sub-millisecond commands do
not tie at zero: they are timed over a loop of runs.

Between two runs of the loop, each `--fresh` folder is emptied (the runs' TMPDIR, and a bubblewrap
sandbox's private /tmp): what one run leaves there does not help the next.

FD is not passed on to ARGV (a descriptor of ours is not inheritable), and ARGV's standard output
is a pipe read here: nothing the command prints or writes reaches the report but through `stdout`.
This process is not dumpable (`PR_SET_DUMPABLE` 0), so the command cannot open FD through
`/proc/PID/fd` or trace this process either.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time

TYPE_CHECKING = False  # True for the type checker only: `typing` is slow to import
if TYPE_CHECKING:
    from resource import struct_rusage

    from hilbert.commands import reaper
else:  # a script under -I: hilbert/commands/reaper.py (the walk that kills what is left below) by path
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "commands"))
    import reaper

MAX_RUNS = 1000
MAX_WALL_S = 2.0  # a loop this long has runs enough (a microsecond clock reads them), even when loaded
MAX_STDOUT = 1_000_000


def _cpu(usage: struct_rusage) -> float:
    return float(usage.ru_utime + usage.ru_stime)


def _read(fd: int, into: bytearray) -> None:
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            if len(into) < MAX_STDOUT:
                into += chunk[: MAX_STDOUT - len(into)]


def one_run(argv: list[str]) -> tuple[int, float, float, bytes]:
    """(exit status, CPU seconds of the tree, wall seconds, stdout) of one run of `argv`."""
    read_fd, write_fd = os.pipe()
    started = time.perf_counter()
    actions = [(os.POSIX_SPAWN_DUP2, write_fd, 1), (os.POSIX_SPAWN_CLOSE, read_fd)]
    child = os.posix_spawnp(argv[0], argv, os.environ, file_actions=actions, setsigdef=reaper.DEFAULTS)
    os.close(write_fd)
    printed = bytearray()
    reader = threading.Thread(target=_read, args=(read_fd, printed))
    reader.start()
    cpu, status = 0.0, 0
    while True:  # until the command's own process ends: reap what ends meanwhile, counting it
        pid, wait_status, usage = os.wait4(-1, 0)
        cpu += _cpu(usage)
        if pid == child:
            status = os.waitstatus_to_exitcode(wait_status)
            break
    while True:  # then end everything still below, reaping (and counting) each
        try:
            while (found := os.wait4(-1, os.WNOHANG))[0] != 0:
                cpu += _cpu(found[2])
        except ChildProcessError:
            break
        for pid, begun in reaper._descendants(os.getpid()):
            reaper._kill(pid, begun)
        try:
            cpu += _cpu(os.wait4(-1, 0)[2])
        except ChildProcessError:
            break
    wall = time.perf_counter() - started
    reader.join()
    return status, cpu, wall, bytes(printed)


def answer(stdout: bytes) -> list[str]:
    """The output's non-empty lines, stripped, without the last when it is one finite number."""
    lines = [line.strip() for line in stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    try:
        if lines and abs(float(lines[-1])) < float("inf"):
            return lines[:-1]
    except ValueError:
        pass
    return lines


def _empty(folder: str, device: int | None = None) -> None:
    """Remove what `folder` holds but what lies on another filesystem: in a bubblewrap sandbox's
    private /tmp, the folders bound into it (the measurement's own, its TMPDIR among them, where it
    lies under the real /tmp) are left alone."""
    try:
        device = os.stat(folder).st_dev if device is None else device
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_dev != device:
                continue
            if entry.is_dir(follow_symlinks=False):
                _empty(entry.path, device)
                os.rmdir(entry.path)  # not when a bound folder lies below: it stays, and so does this
            else:
                os.unlink(entry.path)


def main(args: list[str]) -> int:
    try:
        split = args.index("--")
        options, argv = args[:split], args[split + 1 :]
        pairs = list(zip(options[::2], options[1::2], strict=True))
        report = int(dict(pairs)["--report"])
        min_cpu = float(dict(pairs)["--min-cpu"])
        fresh = [value for name, value in pairs if name == "--fresh"]
        if not argv or {name for name, _ in pairs} - {"--report", "--min-cpu", "--fresh"}:
            raise ValueError
    except (ValueError, KeyError):
        print("usage: timer.py --report FD --min-cpu SECONDS [--fresh DIR]... -- ARGV...", file=sys.stderr)
        return 2
    os.set_inheritable(report, False)  # the command never gets it
    reaper._prctl(reaper.PR_SET_CHILD_SUBREAPER, 1)
    reaper._prctl(reaper.PR_SET_DUMPABLE, 0)
    runs, cpu, wall, status, first, same = 0, 0.0, 0.0, 0, b"", True
    while runs < MAX_RUNS:
        if runs:
            for folder in fresh:
                _empty(folder)
        code, used, took, printed = one_run(argv)
        runs, cpu, wall = runs + 1, cpu + used, wall + took
        first, same = (printed, same) if runs == 1 else (first, same and answer(printed) == answer(first))
        if code != 0:
            status = code
            break
        if cpu >= min_cpu or wall >= MAX_WALL_S:
            break
    found = {
        "runs": runs,
        "cpu": cpu / runs,
        "wall": wall / runs,
        "status": status,
        "stdout": first.decode("utf-8", "replace"),
        "same": same,
    }
    with os.fdopen(report, "w") as out:
        out.write(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
