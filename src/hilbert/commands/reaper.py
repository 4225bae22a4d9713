"""The subreaper: where no control group holds a command (`hilbert.commands.groups`: none here, or not
root), the command runs under this small process, which ends every process the command leaves behind.
Standard library only, so it starts fast as a script (`run_process` puts it in front of the argv it
runs, outside the sandbox, whenever `Limits` are given and no group was made):

    python -I -S reaper.py -- ARGV...

It is a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`, set by its parent between fork and exec with
`subreaper_flag()`: the mark is kept across exec), so whatever the command starts and orphans — a
`setsid` child, a double fork, `nohup`, `disown` — is reparented to it rather than to init. It starts
ARGV (with the signals Python ignores set back to their defaults), reaps the orphans as they
exit while ARGV runs, and when ARGV's process has exited, SIGKILLs every process still below it (a walk
of `/proc/*/stat` by parent, each killed through a pidfd checked against its start time, so a reused
pid is never hit), reaps them, and repeats until it has no child; then it exits as ARGV did — the same
exit code, or killed by the same signal (without a core dump). It writes nothing itself: ARGV's
stdin, stdout and stderr are the ones it was given. SIGTERM (the runner's timeout or cancellation,
`run_process`) does the same at once: ARGV and everything below it killed, then it dies of SIGTERM.

Why a process of its own and not a `preexec_fn`: the subreaper must outlive the command's main process
to see what it left, so it cannot be that process; and hilbert itself, which runs many commands at once,
cannot tell whose orphan it was given. Why a script: `-m hilbert.commands.reaper` would import the
package (and needs `site` for an editable install), tens of milliseconds before every command; and
why the parent sets the flag: ctypes alone takes about 30 ms to import.

Limits, where a control group has none: the number of processes and their memory are not capped
(`RLIMIT_FSIZE` and the other rlimits still apply, set before this starts: they are inherited); a
process killed in the moment it forks may leave a child that is found and killed on the next walk. A
command that can signal this process can kill it first (unsandboxed, the same user), and what it left
then goes to init; under Landlock (ABI 6, signals scoped to the sandbox) and bubblewrap (its own pid
namespace) it cannot. Processes handed to something outside (a daemon, `systemd-run`) were never its.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # True for the type checker only: `typing` is slow to import
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
    from typing import NoReturn
else:
    import _signal as signal  # `signal` without its enums, which take as long to import as Python to start

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
DEFAULTS = (signal.SIGPIPE, signal.SIGXFSZ)  # ignored by Python at start-up; the command gets defaults


class _Stopped(Exception):
    """SIGTERM arrived while the command ran."""


_waiting = False


def _on_term(signum: int, frame: object) -> None:
    if _waiting:
        raise _Stopped


def main(argv: list[str]) -> int:
    global _waiting
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: reaper.py -- ARGV...", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_term)
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ, setsigdef=DEFAULTS)
    except OSError as error:
        print(f"hilbert: {argv[0]}: {error.strerror}", file=sys.stderr)
        return 127 if isinstance(error, FileNotFoundError) else 126
    status = None
    try:
        _waiting = True
        status = _wait_for(child)
        _waiting = False
    except _Stopped:
        _waiting = False
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # what follows is not interrupted
    _end_every_descendant()
    if status is None:
        _die_of(signal.SIGTERM)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        _die_of(-code)
    return code


def _wait_for(child: int) -> int:
    """Reap orphans as they exit until `child` has; its wait status."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return status


def _end_every_descendant() -> None:
    """SIGKILL every process below this one and reap, until it has no child left."""
    while True:
        try:
            while (pid := os.waitpid(-1, os.WNOHANG)[0]) != 0:
                pass  # reaped one already dead; more may be
        except ChildProcessError:
            return  # no child at all: nothing below us (orphans come to us, a subreaper)
        for pid, started in _descendants(os.getpid()):
            _kill(pid, started)
        try:
            os.waitpid(-1, 0)  # one of them has died: reap it, then look again
        except ChildProcessError:
            return


def _descendants(root: int) -> list[tuple[int, str]]:
    """Every process below `root`, with its start time, from one read of /proc."""
    children: dict[int, list[tuple[int, str]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _stat(int(name))
        if stat is not None:
            children.setdefault(stat[0], []).append((int(name), stat[1]))
    found, todo = [], [root]
    while todo:
        for pid, started in children.get(todo.pop(), ()):
            found.append((pid, started))
            todo.append(pid)
    return found


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of `pid`, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[19].decode()


def _kill(pid: int, started: str) -> None:
    """SIGKILL `pid` if it is still the process that started at `started`."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfd (Linux < 5.3): by pid, checked just before
        stat = _stat(pid)
        try:
            if stat is not None and stat[1] == started:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        return
    try:
        stat = _stat(pid)
        if stat is not None and stat[1] == started:  # the pidfd is the process we walked to
            signal.pidfd_send_signal(handle, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(handle)


def _die_of(number: int) -> NoReturn:
    """End this process by signal `number`, as the command ended (no core dump of our own)."""
    _prctl(PR_SET_DUMPABLE, 0)
    if number != signal.SIGKILL:
        signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
    os._exit(128 + number)  # a signal whose default is not to end a process


def _prctl(option: int, value: int) -> None:
    import ctypes  # here, not at the top: ctypes takes longer to import than the rest of this script

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def subreaper_flag() -> Callable[[], None]:
    """For the parent that starts this script: a call for its child between fork and exec that marks
    it a child subreaper (the mark is kept across exec). ctypes is loaded here, in the parent, so the
    script itself does without it (about 30 ms less before every command)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def mark() -> None:
        if prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")

    return mark


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
