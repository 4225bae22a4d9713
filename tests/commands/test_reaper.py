"""Without a control group, no process of a command outlives it: the subreaper it runs under
(`hilbert.commands.reaper`) kills what a `setsid` or a double fork left behind, when the command exits
or times out, and passes its output and exit status through unchanged. Through the real `Runner` and
`run_process`, with real processes, unsandboxed and under Landlock (which has no pid namespace)."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hilbert.commands import Runner, run_process
from hilbert.commands.process import Limits
from hilbert.commands.runner import Ran, Timeout
from hilbert.security.landlock import abi_version
from hilbert.security.sandbox import Sandbox, detect

NO_GROUP = Limits()  # no `groups`: what a machine without cgroups, or a user who is not root, gets
WAIT_FOR_PID_FILES = "for i in $(seq 600); do test -s a.pid && test -s b.pid && break; sleep 0.05; done"


def sandbox(kind: str) -> Sandbox:
    if kind == "unsandboxed":
        return Sandbox("unsandboxed")
    abi = abi_version()
    if abi == 0:
        pytest.skip("this kernel has no Landlock")
    found = detect(which=lambda name: None, network=abi < 4)
    assert found.kind == "landlock", found.why
    return found


def run(kind: str, command: str, root: Path, timeout_s: float = 60.0) -> Ran:
    runner = Runner(sandbox(kind), limits=NO_GROUP, slots=None)
    return asyncio.run(runner.run(command, root=root, timeout=Timeout(timeout_s, "test")))


def running(marker: str) -> list[int]:
    """The live processes (not zombies) whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(name))
    return found


@pytest.fixture
def sleeps() -> Iterator[Callable[[], str]]:
    """`sleep 3000.<random>`: a command line no other process has; whatever is left is killed after."""
    made: list[str] = []

    def fresh() -> str:
        made.append(f"sleep {3000 + len(made)}.{secrets.randbelow(10**9):09d}")
        return made[-1]

    yield fresh
    for marker in made:
        for pid in running(marker):
            os.kill(pid, signal.SIGKILL)


def escaping(first: str, second: str) -> str:
    """Start `first` in a session of its own and `second` by a double fork; wait until both run."""
    return (
        f"setsid sh -c 'echo $$ > a.pid; exec {first}' & "
        f"""sh -c '(sh -c "echo \\$\\$ > b.pid; exec {second}" &) &'; """
        f"{WAIT_FOR_PID_FILES}; "
    )


@pytest.mark.parametrize("kind", ["unsandboxed", "landlock"])
def test_what_a_setsid_and_a_double_fork_left_dies_with_the_command(
    kind: str, tmp_path: Path, sleeps: Callable[[], str]
) -> None:
    first, second = sleeps(), sleeps()
    done = run(kind, escaping(first, second) + "echo to-stdout; echo to-stderr >&2; exit 7", tmp_path)
    assert (tmp_path / "a.pid").read_text() and (tmp_path / "b.pid").read_text()  # both had started
    assert done.exit_code == 7 and done.output.render() == "to-stdout\nto-stderr\n", done.text(tmp_path)
    assert running(first) == [] and running(second) == [], "a process outlived its command"


def test_a_timeout_still_kills_the_command_and_what_it_left(
    tmp_path: Path, sleeps: Callable[[], str]
) -> None:
    first, second, last = sleeps(), sleeps(), sleeps()
    done = run("unsandboxed", escaping(first, second) + f"echo started; {last}", tmp_path, timeout_s=5)
    assert done.timed_out and "started" in done.text(tmp_path), done.text(tmp_path)
    assert running(first) == running(second) == running(last) == []


def test_exit_by_a_signal_and_stdin_pass_through(tmp_path: Path) -> None:
    assert run("unsandboxed", "kill -TERM $$", tmp_path).status() == "exit -15: killed by SIGTERM"
    out = bytearray()
    code = asyncio.run(
        run_process(
            ["sh", "-c", "cat; printf '\\0\\377'; exit 3"],
            cwd=tmp_path,
            env=os.environ,
            timeout_s=60,
            stdout=out.extend,
            stdin=b"from stdin\n",
            limits=NO_GROUP,
        )
    )
    assert (code, bytes(out)) == (3, b"from stdin\n\0\xff")


def test_a_missing_program_is_still_a_file_not_found_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        asyncio.run(
            run_process(
                ["no-such-program-here"],
                cwd=tmp_path,
                env=os.environ,
                timeout_s=60,
                stdout=print,
                limits=NO_GROUP,
            )
        )


def test_under_landlock_a_command_cannot_kill_its_reaper_to_escape(
    tmp_path: Path, sleeps: Callable[[], str]
) -> None:
    if abi_version() < 6:
        pytest.skip("signals are scoped to the sandbox from Landlock ABI 6 (Linux 6.12)")
    first, second = sleeps(), sleeps()
    done = run("landlock", escaping(first, second) + 'kill -KILL $PPID; echo "kill: $?"', tmp_path)
    assert done.exit_code == 0 and "kill: 1" in done.text(tmp_path), done.text(tmp_path)
    assert running(first) == running(second) == []
