"""What the interop tests share: where the pinned clients live (see tools/README.md), a sample task
and a snapshot of its files, a clean environment for a client, running a client with a deadline, and
the checks of the outcome a user cares about (the suite passes, only the buggy file changed)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    def tail(self, chars: int = 3000) -> str:
        out, err = self.stdout[-chars:], self.stderr[-chars:]
        return f"exit {self.returncode}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"


def run_client(
    argv: list[str], *, cwd: Path, env: dict[str, str], stdin: str = "", timeout: float = CLIENT_TIMEOUT_S
) -> Finished:
    """Run a client in its own process group with `stdin` as its whole input; on the deadline, kill
    the group (clients spawn shells and helpers) and fail with what it printed."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        finished = Finished(-9, stdout, stderr)
        pytest.fail(
            f"{Path(argv[0]).name} did not finish within {timeout:.0f} s\n{finished.tail()}", pytrace=False
        )
    return Finished(process.returncode, stdout, stderr)


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
