"""Each command in a control group of its own: what its processes may take, and none outliving it.

A command's processes — whatever they do: `setsid`, a double fork, `nohup` — stay in the control group
the command started in, so the group is what is limited and what is killed when the command ends:

    groups = CommandGroups.detect()        # once, at the edge: what this machine allows
    group = groups.new(processes=256, memory_mb=2048)
    ... start the command with `preexec_fn=group.join` ...
    group.close()                          # every process still in it killed, the group removed

`detect()` finds the cgroup v1 `pids` and `memory` hierarchies that this process may make groups in
(as root; the group is made beneath this process's own group in each hierarchy, so the limits above
still hold). A group is named `hilbert-PID-N-RANDOM`: a pid is reused (a container's soon), and a
process killed before it closed its groups leaves them behind, so the pid alone would collide.
`detect()` also removes such leftovers: empty groups whose owner pid runs no more, older than a minute
(a group another pid namespace's process just made and has not joined yet is not taken from it).
Where no group can be made (not root, no cgroup v1 hierarchy of either controller),
`missing` names the controllers and `hilbert status` shows what is then not capped — the number of
processes, the memory — while the command runs under a subreaper (`hilbert.commands.reaper`) that
kills whatever it leaves, so nothing outlives it either way. cgroup v2 delegation (a cgroup2 mount
with a `cgroup.subtree_control` we may write, `memory.max`, `cpu.weight`, `cgroup.kill`) is not built:
the machines this was written on have cgroup v1 only, where it cannot be tested.

Nothing here runs a command; `hilbert.commands.process.run_process` joins the group in the child
(between fork and exec) and closes it when the command is over.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory")
_numbers = itertools.count(1)


@dataclass(frozen=True)
class CommandGroups:
    """Where new groups are made: a folder per controller (`pids`, `memory`) this process may write."""

    parents: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def detect(cls, root: Path = CGROUP_ROOT, *, leftover_age_s: float = 60.0) -> CommandGroups:
        """The cgroup v1 hierarchies of `CONTROLLERS` in which a group can be made and removed here,
        with the empty groups dead processes left there (older than `leftover_age_s`) removed."""
        parents: dict[str, Path] = {}
        for controller, own in _own_groups().items():
            if controller not in CONTROLLERS:
                continue
            parent = root / controller / own.lstrip("/")
            probe = parent / f"hilbert-probe-{os.getpid()}-{secrets.token_hex(4)}"
            try:
                probe.mkdir()
                probe.rmdir()
            except OSError:
                continue
            parents[controller] = parent
            _remove_leftovers(parent, leftover_age_s)
        return cls(parents)

    @property
    def missing(self) -> tuple[str, ...]:
        """The controllers no group can be made in here (their limits are not enforced)."""
        return tuple(c for c in CONTROLLERS if c not in self.parents)

    def describe(self) -> str:
        if not self.missing:
            return "each command in a control group of its own (processes and memory capped, all killed)"
        lost = {"pids": "the number of processes", "memory": "memory"}
        return (
            "no control group for " + " and ".join(lost[c] for c in self.missing) + ": not capped"
            + ("" if self.parents else " (a subreaper kills whatever a command leaves running)")
        )  # fmt: skip

    def new(self, *, processes: int | None = None, memory_mb: int | None = None) -> CommandGroup:
        """A fresh group for one command, with its limits written (None: no limit of that kind)."""
        name = f"hilbert-{os.getpid()}-{next(_numbers)}-{secrets.token_hex(4)}"
        folders: list[Path] = []
        try:
            for controller, parent in self.parents.items():
                folder = parent / name
                folder.mkdir()
                folders.append(folder)
                if controller == "pids" and processes is not None:
                    (folder / "pids.max").write_text(f"{processes}\n")
                if controller == "memory" and memory_mb is not None:
                    limit = memory_mb * 1024 * 1024
                    (folder / "memory.limit_in_bytes").write_text(f"{limit}\n")
                    with contextlib.suppress(OSError):  # no swap accounting: the plain limit holds
                        (folder / "memory.memsw.limit_in_bytes").write_text(f"{limit}\n")
        except OSError:
            CommandGroup(tuple(folders)).close()
            raise
        return CommandGroup(tuple(folders))


@dataclass(frozen=True)
class CommandGroup:
    """One command's group: a folder in each hierarchy. `join` runs in the child before exec."""

    folders: tuple[Path, ...]

    def join(self) -> None:
        """Put the calling process in the group (called in the child between fork and exec)."""
        pid = f"{os.getpid()}\n".encode()
        for folder in self.folders:
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            with contextlib.suppress(OSError):
                found |= {int(line) for line in (folder / "cgroup.procs").read_text().split()}
        return found

    def close(self, wait_s: float = 5.0) -> None:
        """Kill every process in the group (again, while new ones appear), then remove the group."""
        deadline = time.monotonic() + wait_s
        while (alive := self.pids()) and time.monotonic() < deadline:
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        for folder in self.folders:
            with contextlib.suppress(OSError):  # still busy past the deadline: left for the kernel
                folder.rmdir()


def _remove_leftovers(parent: Path, age_s: float) -> None:
    """Remove the empty `hilbert-PID-…` groups in `parent` whose PID runs no more (rmdir refuses a group
    that still holds a process: those are left alone)."""
    now = time.time()
    for folder in parent.glob("hilbert-*"):
        owner = folder.name.split("-")[1]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            if now - folder.stat().st_mtime >= age_s:
                folder.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _own_groups() -> dict[str, str]:
    """This process's group per cgroup v1 controller, from /proc/self/cgroup."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(","):
                if controller:
                    groups[controller] = path
    return groups


__all__ = ["CommandGroup", "CommandGroups"]
