"""The processes a run leaves behind when it dies, and how a later process finds and kills them.

A run's `hilbert.commands.runner.Runner` gives every command it starts the run's *mark*: the
environment variable `HILBERT_RUN_MARK` holding a random token (`new_mark()`), stored in the run's log.
The harness's git (`hilbert.workspaces.git.Git` with `mark=`) carries it too, as `TOKEN:git`. Every
process a command starts inherits the variable — through bubblewrap (which passes the environment on),
the Landlock launcher (which `execvp`s with it), `setsid`, a double fork, `nohup`, `disown` — so after
`hilbert run` is killed (SIGKILL, OOM, a closed terminal), `kill_marked(token)` finds each of them by
reading `/proc/*/environ` and SIGKILLs it, and returns once none is left. A run started from inside
another run's command (hilbert working on hilbert) keeps the outer marks beside its own
(`HILBERT_RUN_MARK=OUTER,INNER`), so killing the outer run's leftovers takes the inner run's too.

How `kill_marked` goes:

- it scans `/proc` for processes whose environment holds the token, sparing itself and its ancestors;
  each is opened as a pidfd *before* its environment is read and signalled through that pidfd, so a
  pid reused meanwhile is never hit;
- commands are SIGKILLed at once; the harness's git is first given `git_grace_s` to end by itself (a git
  killed while it holds `index.lock` or a ref's `.lock` leaves the file behind and the next git on that
  repository fails; with its reader gone it ends soon anyway, by finishing or by SIGPIPE);
- it waits on the pidfds until each process has ended, then scans again, until nothing marked runs (a
  process that forked before it was killed is caught by the next scan), or raises `RunError` naming
  the survivors after `timeout_s`. Ended means a zombie or gone: a killed process whose parent does
  not reap it stays a zombie, which runs nothing. Nothing is reaped here (a process of ours, if any,
  stays for its owner to wait for). A process already exiting when scanned (its memory, environment
  included, released) is not seen, nor waited for: it runs no more code.

Linux only (`/proc`, pidfds: Linux 5.3). Seen from the host, processes inside bubblewrap's pid
namespace are ordinary processes with host pids (bubblewrap's `--die-with-parent` often kills them
first). Reading another process's environment needs the same user (or root): run it as the user the
dead run ran as; processes it may not read are skipped.

Known limit: the mark is only the environment a process was started with. A command that deliberately
starts a child without it (`env -i`, `env -u HILBERT_RUN_MARK`, `execve` with an environment of its
own) escapes this once the run is dead; issue 14 (security hardening) is where the
run's processes get a container that cannot be left (a cgroup). The process group is no second net
here: a double fork leaves it anyway, and a group id recorded before a reboot may name someone else's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from hilbert.errors import RunError

MARK_VARIABLE = "HILBERT_RUN_MARK"
GIT_SUFFIX = ":git"  # the harness's own git, given time to end by itself


def new_mark() -> str:
    """A fresh token for one run (a `Runner`'s default)."""
    return secrets.token_hex(12)


def marking(env: Mapping[str, str], mark: str, *, harness_git: bool = False) -> dict[str, str]:
    """`env` with `mark` added to the marks it already holds (those of a run this one runs inside)."""
    held = [m for m in env.get(MARK_VARIABLE, "").split(",") if m]
    return {**env, MARK_VARIABLE: ",".join([*held, mark + (GIT_SUFFIX if harness_git else "")])}


@dataclass(frozen=True)
class _Marked:
    """A live process that carries the mark, held by a pidfd (closed when `_opened` exits)."""

    pid: int
    pidfd: int
    harness_git: bool


def kill_marked(mark: str, *, timeout_s: float = 30.0, git_grace_s: float = 5.0) -> list[int]:
    """SIGKILL every process whose environment carries `mark` (see the module docstring), wait until
    each has ended, and return the pids killed, sorted. Raises `RunError` if some still run after
    `timeout_s` (a process stuck in the kernel: NFS, a device)."""
    if not mark or "," in mark:
        raise ValueError(f"not a run's mark: {mark!r}")
    if not os.path.isdir("/proc/self") or not hasattr(os, "pidfd_open"):
        raise RunError(
            "cannot look for the dead run's processes: this needs Linux (5.3 or later: /proc and pidfds)",
            hint="stop whatever the run left running yourself, then resume",
        )
    spared = _self_and_ancestors()
    start = time.monotonic()
    deadline, grace_ends = start + timeout_s, start + git_grace_s
    killed: set[int] = set()
    while True:
        with _opened(mark, spared) as found:
            if not found:
                return sorted(killed)
            now = time.monotonic()
            if now > deadline:
                pids = ", ".join(str(p.pid) for p in found)
                raise RunError(
                    f"processes of the dead run still run {timeout_s:g} s after SIGKILL: {pids}",
                    hint=f"kill them (kill -9 {pids.replace(', ', ' ')}) and resume again",
                )
            spare_git = now < grace_ends
            for process in found:
                if process.harness_git and spare_git:
                    continue
                with contextlib.suppress(ProcessLookupError):  # it ended since the scan
                    signal.pidfd_send_signal(process.pidfd, signal.SIGKILL)
                    killed.add(process.pid)
            _wait_ended([p.pidfd for p in found], min(deadline, grace_ends) if spare_git else deadline)


def _wait_ended(pidfds: list[int], until: float) -> None:
    """Until each process has ended (its pidfd turns readable when it is a zombie or gone), or `until`."""
    poller = select.poll()
    for pidfd in pidfds:
        poller.register(pidfd, select.POLLIN)
    left = set(pidfds)
    while left and (remaining := until - time.monotonic()) > 0:
        for pidfd, _ in poller.poll(max(1, int(remaining * 1000))):
            left.discard(pidfd)
            poller.unregister(pidfd)


@contextlib.contextmanager
def _opened(mark: str, spared: set[int]) -> Iterator[list[_Marked]]:
    found: list[_Marked] = []
    try:
        for pid in _pids():
            if pid in spared:
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # gone since the listing
                continue
            kind = _carries(pid, mark)
            if kind is None:
                os.close(pidfd)
            else:
                found.append(_Marked(pid, pidfd, kind))
        yield found
    finally:
        for process in found:
            os.close(process.pidfd)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _carries(pid: int, mark: str) -> bool | None:
    """None: `pid` does not carry `mark` (or is gone, a zombie, or not ours to read); else whether it
    carries it as the harness's git."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = file.read()
    except OSError:  # gone, or another user's
        return None
    prefix = MARK_VARIABLE.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            marks = entry[len(prefix) :].decode(errors="replace").split(",")
            if mark in marks:
                return False
            if mark + GIT_SUFFIX in marks:
                return True
    return None


def _self_and_ancestors() -> set[int]:
    spared, pid = set(), os.getpid()
    while pid > 0 and pid not in spared:
        spared.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                pid = int(file.read().rsplit(b")", 1)[1].split()[1])  # after `(comm)`: state, ppid
        except (OSError, IndexError, ValueError):
            break
    return spared


__all__ = ["MARK_VARIABLE", "kill_marked", "marking", "new_mark"]
