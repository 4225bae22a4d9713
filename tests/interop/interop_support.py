"""What the interop tests share: where the pinned clients live (see tools/README.md), a sample task
and a snapshot of its files, a clean environment for a client, running a client (typing at its prompt
if it has one) until it exits, and the checks of the outcome a user cares about (the suite passes, only
the buggy file changed)."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from hilbert.sim.sample import SampleProject, generate_sample_project

REPO = Path(__file__).resolve().parents[2]
NPM_BIN = REPO / "tools" / "npm" / "node_modules" / ".bin"
VENVS = REPO / ".tools"
CLIENT_TIMEOUT_S = 150  # an upper bound only: a client that works finishes in about 15 s; CI may be loaded
_SKIPPED_DIRS = frozenset({"__pycache__", ".pytest_cache"})


def installed(path: Path, what: str) -> Path:
    """The client's executable, or a failed test that says how to install it (never a skip)."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(
            f"{what} is not installed ({path} is missing): run `make tools` (see tools/README.md)",
            pytrace=False,
        )
    return path


def project_files(root: Path) -> dict[str, bytes]:
    """Every file under `root` (caches left out), by relative path."""
    files = {}
    for path in root.rglob("*"):
        if path.is_file() and not _SKIPPED_DIRS & set(path.relative_to(root).parts):
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


@dataclass(frozen=True)
class Task:
    """A sample project with one bug, and its files before any client touched them."""

    project: SampleProject
    before: dict[str, bytes]

    @property
    def root(self) -> Path:
        return self.project.path


def sample_task(tmp_path: Path, seed: int) -> Task:
    project = generate_sample_project(tmp_path / "project", seed, bugs=1)
    return Task(project, project_files(project.path))


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: hilbert's Python first on PATH (so `python -m pytest` works), node,
    the system; a fresh HOME; nothing from the caller's environment (no keys, no proxies)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    dirs = [str(Path(sys.executable).parent)]
    if node := shutil.which("node"):
        dirs.append(str(Path(node).parent))
    dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    env = {"PATH": os.pathsep.join(dict.fromkeys(dirs)), "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb"}
    # The engineer edits faster than a person: two same-sized versions of a file within one second
    # would share a stale .pyc (its check is mtime in seconds + size), so no bytecode is written.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    typed: tuple[str, ...] = ()  # the lines typed at its prompt, in order

    def tail(self, chars: int = 3000) -> str:
        out, err = self.stdout[-chars:], self.stderr[-chars:]
        typed = "".join(f"\n{line}" for line in self.typed)
        return f"exit {self.returncode}\n--- typed ---{typed}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"


def run_client(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = CLIENT_TIMEOUT_S
) -> Finished:
    """Run a client that asks nothing (its input is empty) until it exits; see `converse`."""
    return converse(argv, cwd=cwd, env=env, prompt=None, lines=(), timeout=timeout)


def converse(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    prompt: str | None,
    lines: Iterable[str],
    timeout: float = CLIENT_TIMEOUT_S,
) -> Finished:
    """Run a client in its own process group as a person at its prompt would: each time its output
    stops at `prompt` (it waits for a line), type the next of `lines`; when they run out, end its input
    (at once when `prompt` is None). `lines` may be a generator: it runs on at each prompt, so it can
    look at what came of the last line (the server's requests, the project) before it types the next.
    The client's pace is the test's pace; `timeout` is an upper bound for a client that hangs: then the
    group (clients spawn shells and helpers) is killed and the test fails with what it printed and what
    was typed."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin and process.stdout and process.stderr
    arrived: queue.Queue[bytes] = queue.Queue()
    errors: list[bytes] = []
    readers = [
        threading.Thread(target=_pump, args=(process.stdout, arrived.put), daemon=True),
        threading.Thread(target=_pump, args=(process.stderr, errors.append), daemon=True),
    ]
    for reader in readers:
        reader.start()
    to_type, typed = iter(lines), []
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    stdout = ""
    deadline = time.monotonic() + timeout
    if prompt is None:
        _type(process.stdin, None)
    try:
        while chunk := _take(arrived, deadline):
            stdout += decoder.decode(chunk)
            if prompt is not None and stdout.endswith(prompt):
                line = next(to_type, None)
                typed += [] if line is None else [line]
                _type(process.stdin, line)
        hung = chunk is None or not _exited(process, deadline)
    finally:
        if process.returncode is None:  # it hangs, or the test failed while it ran
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for reader in readers:
        reader.join()
    while rest := _take(arrived, deadline=0):
        stdout += decoder.decode(rest)
    stdout += decoder.decode(b"", final=True)
    _type(process.stdin, None)
    finished = Finished(process.returncode, stdout, b"".join(errors).decode(errors="replace"), tuple(typed))
    if hung:
        pytest.fail(
            f"{Path(argv[0]).name} did not finish within {timeout:.0f} s\n{finished.tail()}", pytrace=False
        )
    return finished


def _take(arrived: queue.Queue[bytes], deadline: float) -> bytes | None:
    """The next piece of output as it arrives (b"" at its end), or None once the deadline has passed."""
    try:
        return arrived.get(timeout=max(deadline - time.monotonic(), 0))
    except queue.Empty:
        return None


def _exited(process: subprocess.Popen[bytes], deadline: float) -> bool:
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _pump(pipe: IO[bytes], sink: Callable[[bytes], None]) -> None:
    """Pass on what a pipe gives as it arrives, then b"" at its end, and close it."""
    with pipe:
        while chunk := os.read(pipe.fileno(), 65536):
            sink(chunk)
    sink(b"")


def _type(stdin: IO[bytes], line: str | None) -> None:
    """Type `line` and Enter, or end the input if None."""
    with contextlib.suppress(BrokenPipeError):  # it exited meanwhile: its exit status tells
        if line is None:
            stdin.close()
        else:
            stdin.write(line.encode() + b"\n")
            stdin.flush()


def replies(requests: list[dict[str, Any]]) -> str:
    """The conversation as the server saw it, one line a request: what the policy answered."""
    lines = []
    for n, entry in enumerate(requests):
        reply = entry.get("reply") or {}
        calls = ", ".join(_call(c) for c in reply.get("tool_calls", []))
        text = (reply.get("text") or "").replace("\n", " ")[:90]
        lines.append(f"{n:3} {entry.get('path')} -> {text!r} {calls}")
    return "\n".join(lines)


def assert_fixed(task: Task, finished: Finished, requests: list[dict[str, Any]]) -> None:
    """The outcome a user cares about: the project's own test suite passes now, the tests are as they
    were, and the only file that changed is the one with the bug (a one-file edit, nothing left behind)."""
    context = f"\n{finished.tail()}\n--- server replies ---\n{replies(requests)}"
    after = project_files(task.root)
    for test_file in task.project.test_files:
        assert after.get(test_file) == task.before[test_file], f"the client changed {test_file}{context}"
    changed = sorted(p for p in after.keys() | task.before.keys() if after.get(p) != task.before.get(p))
    assert changed == [task.project.bugs[0].file], f"changed files: {changed}{context}"
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=task.root,
        env=clean_env(task.root.parent),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert suite.returncode == 0, f"the project's tests still fail:\n{suite.stdout[-3000:]}{context}"


def _call(call: dict[str, Any]) -> str:
    arguments = (
        call["raw_arguments"] if call.get("raw_arguments") is not None else json.dumps(call["arguments"])
    )
    return f"{call['name']}({arguments[:90]})"


def tool_calls(requests: list[dict[str, Any]]) -> list[str]:
    """The names of the tool calls the server answered with, in order."""
    return [call["name"] for entry in requests for call in (entry.get("reply") or {}).get("tool_calls", [])]
