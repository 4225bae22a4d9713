"""What a command may take, and that none of its processes outlives it: a control group per command
(`hilbert.commands.groups`) where the machine gives one, and rlimits set in the child. Through the
real `Runner` and `run_process`, with real processes."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from hilbert.commands import Runner
from hilbert.commands.groups import CommandGroups
from hilbert.commands.process import Limits
from hilbert.commands.runner import Timeout

GROUPS = CommandGroups.detect()
needs_groups = pytest.mark.skipif(
    bool(GROUPS.missing), reason=f"this machine gives no control group: {GROUPS.describe()}"
)


def run(command: str, root: Path, limits: Limits, timeout_s: float = 60.0) -> tuple[int | None, str]:
    runner = Runner.unsandboxed(limits=limits, slots=None)
    done = asyncio.run(runner.run(command, root=root, timeout=Timeout(timeout_s, "test")))
    return done.exit_code, done.text(root)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


@needs_groups
def test_a_process_that_left_the_command_by_setsid_and_a_double_fork_dies_with_it(tmp_path: Path) -> None:
    code, output = run(
        "(setsid bash -c 'sleep 300 & echo $! > escaped.pid' &) ; "
        "for i in $(seq 100); do test -s escaped.pid && break; sleep 0.05; done; echo started",
        tmp_path,
        Limits(groups=GROUPS),
    )
    assert code == 0 and "started" in output, output
    pid = int((tmp_path / "escaped.pid").read_text())
    assert not alive(pid), f"pid {pid} outlived its command"


FORKS = """
import os, time
children, refused = [], 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
print("forked", len(children), "refused", refused, flush=True)
"""


@needs_groups
def test_a_fork_bomb_is_capped_at_the_processes_a_command_may_have(tmp_path: Path) -> None:
    (tmp_path / "forks.py").write_text(FORKS)
    _, output = run("python3 forks.py", tmp_path, Limits(groups=GROUPS, processes=50))
    words = output.split()
    forked, refused = int(words[words.index("forked") + 1]), int(words[words.index("refused") + 1])
    assert forked < 50 and refused > 250, output  # the rest were killed when the command ended


@needs_groups
def test_memory_past_the_group_limit_is_refused(tmp_path: Path) -> None:
    code, output = run(
        'python3 -c \'b = bytearray(600 * 1024 * 1024); b[::4096] = b"x" * len(b[::4096]); print("got it")\'',
        tmp_path,
        Limits(groups=GROUPS, group_memory_mb=200),
    )
    assert "got it" not in output and code != 0, (code, output)


def test_a_file_past_the_size_limit_is_cut_short(tmp_path: Path) -> None:
    code, _ = run("head -c 50M /dev/zero > big.bin", tmp_path, Limits(file_mb=10))
    assert code in (1, -signal.SIGXFSZ, 128 + signal.SIGXFSZ), code
    assert (tmp_path / "big.bin").stat().st_size <= 10 * 1024 * 1024


def test_without_control_groups_status_says_what_is_not_capped() -> None:
    none = CommandGroups({})
    assert none.missing == ("pids", "memory")
    assert none.describe() == (
        "no control group for the number of processes and memory: not capped "
        "(a subreaper kills whatever a command leaves running)"
    )
    runner = Runner.unsandboxed(limits=Limits(groups=none))
    assert runner.describe().endswith(none.describe())


@needs_groups
def test_groups_a_killed_process_left_behind_neither_collide_nor_stay() -> None:
    """A process killed before it closed its groups leaves them, and its pid comes back (CI saw
    'File exists: /sys/fs/cgroup/pids/hilbert-6005-3'): a new group never takes a used name, and the
    next `detect()` removes the leftovers of pids that run no more, but not a live process's group."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    parent = next(iter(GROUPS.parents.values()))
    leftovers = [parent / f"hilbert-{dead.pid}-{n}" for n in (1, 2, 3)]
    for folder in leftovers:
        folder.mkdir()
    mine = GROUPS.new(processes=8)
    try:
        assert all(folder.exists() for folder in leftovers)
        assert CommandGroups.detect(leftover_age_s=3600).parents == GROUPS.parents
        assert all(folder.exists() for folder in leftovers), "a young leftover is kept"
        CommandGroups.detect(leftover_age_s=0)
        assert not any(folder.exists() for folder in leftovers)
        assert all(folder.exists() for folder in mine.folders), "a live process's group is kept"
        fresh = [GROUPS.new() for _ in range(3)]
        for group in fresh:
            group.close()
        names = {group.folders[0].name for group in fresh}
        assert len(names) == 3 and all(name.count("-") == 3 for name in names)
    finally:
        mine.close()
        for folder in leftovers:
            if folder.exists():
                folder.rmdir()
