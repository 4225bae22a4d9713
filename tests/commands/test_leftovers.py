"""After `hilbert run` dies (SIGKILL), every process its commands started — a plain long command, a
background child that left with `setsid` and a double fork — is found by the run's mark and killed
before anything restarts, under bubblewrap, Landlock and unsandboxed alike; nothing else is touched."""

from __future__ import annotations

import asyncio
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hilbert.commands import Runner, Timeout, command_env
from hilbert.commands.leftovers import MARK_VARIABLE, kill_marked, marking, new_mark
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import Sandbox, detect
from hilbert.workspaces.git import Git

DYING_RUN = Path(__file__).with_name("dying_run.py")
KINDS = ("bubblewrap", "landlock", "unsandboxed")


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def running(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: it is dead and only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return file.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def pids_running(argv: str) -> list[int]:
    """Host pids of the processes whose command line is `argv` (seen from outside any sandbox)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as file:
                    if file.read().replace(b"\0", b" ").strip() == argv.encode() and running(int(name)):
                        found.append(int(name))
            except OSError:
                continue
    return found


def sandbox(kind: str) -> Sandbox:
    if kind == "unsandboxed":
        return Sandbox("unsandboxed")
    if kind == "landlock":
        if abi_version() == 0:
            pytest.skip("this kernel has no Landlock")
        found = detect(which=lambda name: None, network=abi_version() < 4)
    else:
        found = detect()
    if found.kind != kind:
        pytest.fail(
            f"no {kind} on this machine ({found.why}): run `make sandbox` (see README)", pytrace=False
        )
    return found


@pytest.fixture
def sleeps() -> Iterator[Callable[[], str]]:
    """`sleep` command lines no other process has (a duration of its own), all killed afterwards
    whatever the test did."""
    made: list[str] = []

    def fresh() -> str:
        made.append(f"sleep {3000 + len(made)}.{secrets.randbelow(10**9):09d}")
        return made[-1]

    yield fresh
    for argv in made:
        for pid in pids_running(argv):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("kind", KINDS)
def test_a_dead_runs_commands_and_their_escaped_children_are_killed_and_nothing_else(
    kind: str, tmp_path: Path, sleeps: Callable[[], str]
) -> None:
    sandbox(kind)  # skip or fail here, not in the child
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    plain, escaped, unrelated_argv = sleeps(), sleeps(), sleeps()
    commands = [
        f"echo started > plain.pid; {plain}",  # its run() is awaited when the run dies
        # a background child leaves the group and the session, then forks the sleep and exits
        f"setsid bash -c '{escaped} & echo $! > escaped.pid' & {plain}",
    ]
    mark = new_mark()
    run = subprocess.Popen([sys.executable, str(DYING_RUN), kind, str(workspace), mark, *commands])
    unrelated = subprocess.Popen(unrelated_argv.split(), env=command_env())
    try:
        wait_for(
            lambda: (workspace / "plain.pid").exists() and (workspace / "escaped.pid").exists(),
            "the commands to start",
        )
        wait_for(lambda: len(pids_running(plain)) == 2 and len(pids_running(escaped)) == 1, "the sleeps")
        left = pids_running(plain) + pids_running(escaped)

        run.send_signal(signal.SIGKILL)  # the orchestrator dies; nothing it started is told
        assert run.wait() == -signal.SIGKILL
        killed = kill_marked(mark)

        if kind == "bubblewrap":  # its --die-with-parent is often first: what is exiting is not seen
            wait_for(lambda: not any(running(pid) for pid in left), "bubblewrap's own kill")
        else:
            assert set(left) <= set(killed)
        assert not any(running(pid) for pid in left), [pid for pid in left if running(pid)]
        assert unrelated.poll() is None and running(unrelated.pid)
        assert kill_marked(mark) == []  # nothing left to kill
    finally:
        run.kill()
        run.wait()
        unrelated.kill()
        unrelated.wait()


@pytest.mark.parametrize("kind", KINDS)
def test_the_mark_reaches_into_every_sandbox_seen_from_outside(
    kind: str, tmp_path: Path, sleeps: Callable[[], str]
) -> None:
    """While the run lives (under bubblewrap its --die-with-parent may beat us when it dies): its
    commands, inside bubblewrap's pid namespace too, are found by their host pids and end killed."""
    sandbox(kind)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    plain = sleeps()
    mark = new_mark()
    run = subprocess.Popen(
        [sys.executable, str(DYING_RUN), kind, str(workspace), mark, f"echo started > plain.pid; {plain}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: (workspace / "plain.pid").exists() and len(pids_running(plain)) == 1, "the sleep")
        (sleeping,) = pids_running(plain)
        killed = kill_marked(mark)
        assert not running(sleeping)
        # under bubblewrap, killing its pid 1 may take the sleep with it before the sleep's own SIGKILL
        assert sleeping in killed if kind != "bubblewrap" else killed
        out, _ = run.communicate(timeout=60)
        assert run.returncode == 0 and out.split("\n")[0] == "exit -9: killed by SIGKILL"
    finally:
        run.kill()
        run.wait()


@pytest.mark.parametrize("kind", KINDS)
def test_every_command_carries_the_runs_mark_and_keeps_an_outer_runs(kind: str, tmp_path: Path) -> None:
    runner = Runner(sandbox(kind), {**command_env(), MARK_VARIABLE: "outer"}).marked("inner")
    ran = asyncio.run(runner.run(f"echo ${MARK_VARIABLE}", root=tmp_path, timeout=Timeout(60, "test")))
    assert ran.ok and ran.text(tmp_path).strip() == "outer,inner"
    assert Runner.unsandboxed().mark != Runner.unsandboxed().mark  # a fresh one per runner by default


def test_the_harness_git_carries_the_mark_as_git_and_is_killed_after_its_grace(
    tmp_path: Path, sleeps: Callable[[], str]
) -> None:
    mark = new_mark()
    git = Git(home=tmp_path, mark=mark)
    said = asyncio.run(git.run("-c", f"alias.say=!echo ${MARK_VARIABLE}", "say", cwd=tmp_path))
    assert said.stdout.strip() == f"{mark}:git"

    nap = sleeps()  # a git that would not end by itself, run as the dead run's git would be
    stuck = subprocess.Popen(
        ["git", "-c", f"alias.nap=!{nap}", "nap"], cwd=tmp_path, env=git.environment(), start_new_session=True
    )
    wait_for(lambda: len(pids_running(nap)) == 1, "git's sleep")
    (sleeping,) = pids_running(nap)
    killed = kill_marked(mark, git_grace_s=0.5)
    assert {stuck.pid, sleeping} <= set(killed)
    assert stuck.wait() == -signal.SIGKILL and not running(sleeping)


def test_a_marked_child_of_ours_is_killed_but_left_for_us_to_reap(sleeps: Callable[[], str]) -> None:
    mark = new_mark()
    child = subprocess.Popen(sleeps().split(), env=marking(command_env(), mark))
    wait_for(lambda: running(child.pid) and _environ_marked(child.pid, mark), "the child's exec")
    assert kill_marked(mark) == [child.pid]  # it returns with the child a zombie: dead, not reaped
    assert child.wait() == -signal.SIGKILL  # the owner still gets its exit status


def test_the_killer_spares_itself_and_its_ancestors_when_they_carry_the_mark(tmp_path: Path) -> None:
    """`hilbert run --resume` typed in a shell that a dead run's command left open must not kill itself."""
    mark = new_mark()
    script = f"from hilbert.commands.leftovers import kill_marked; print(kill_marked({mark!r}))"
    shell = subprocess.run(
        ["bash", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}; echo survived"],
        env=marking(command_env(), mark),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shell.stdout.split() == ["[]", "survived"], shell.stderr


def _environ_marked(pid: int, mark: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return f"{MARK_VARIABLE}={mark}".encode() in file.read().split(b"\0")
    except OSError:
        return False
