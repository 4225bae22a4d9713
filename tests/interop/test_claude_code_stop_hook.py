"""The stop gate as Claude Code's Stop hook: the real binary (pinned in tools/npm), driven through the
fake server by an engineer that stops early and claims done. `hilbert hook stop` sends it back once with
the gate's reasons; it then fixes the bug for real, and the hook lets it stop. When the hook fails, its
error still sends the agent back (fail closed), never reads to Claude Code as a hook script gone missing.

Claude Code (2.1.197) files every `decision: block` of a Stop hook among its "hook errors" and puts a
`stop-hook-error` notification ("Stop hook error occurred") in its stream-json after it
(anthropics/claude-code#12667); the hook sends this version its reason as `additionalContext`, which
keeps it working without one: none may appear."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from interop_support import (
    NPM_BIN,
    Finished,
    Task,
    clean_env,
    installed,
    project_files,
    run_client,
    sample_task,
)

import hilbert
from git_support import git
from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop

# the hook runs the hilbert under test, not whichever one the interpreter's installation points at
SOURCE = Path(hilbert.__file__).resolve().parents[1]


def run_with_hook(tmp_path: Path, task: Task, gate: Path) -> tuple[Finished, list[str], list[dict[str, Any]]]:
    """Claude Code on `task` with `hilbert hook stop --gate GATE` as its Stop hook: how it finished,
    the bodies of the requests it sent the fake server, and its stream-json events."""
    claude = installed(NPM_BIN / "claude", "Claude Code")
    config = tmp_path / "claude-config"
    config.mkdir()
    hook = shlex.join(["env", f"PYTHONPATH={SOURCE}", sys.executable, "-m", "hilbert.ui.cli"])
    hook += f" hook stop --gate {shlex.quote(str(gate))}"
    hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": hook, "timeout": 120}]}]}}
    (config / "settings.json").write_text(json.dumps(hooks))

    with FakeServer("engineer:stop_early=1", record=tmp_path / "requests.jsonl") as server:
        env = clean_env(
            tmp_path,
            ANTHROPIC_BASE_URL=server.base_url,
            ANTHROPIC_API_KEY="hilbert-fake-key",
            CLAUDE_CONFIG_DIR=str(config),
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        argv = [str(claude), "-p", task.project.task, "--output-format", "stream-json", "--verbose"]
        argv += ["--include-hook-events"]  # hook_started / hook_response events with each run's outcome
        argv += ["--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits", "--allowedTools", "Bash"]
        finished = run_client(argv, cwd=task.root, env=env)
        requests = server.requests
    bodies = [json.dumps(r.get("body")) for r in requests if r.get("protocol") == "anthropic"]
    events = [json.loads(line) for line in finished.stdout.splitlines() if line.startswith("{")]
    return finished, bodies, events


def hook_runs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if (e.get("type"), e.get("subtype")) == ("system", "hook_response")]


def hook_error_notices(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("subtype") == "notification" and e.get("key") == "stop-hook-error"]


def committed_task(tmp_path: Path) -> tuple[Task, str]:
    task = sample_task(tmp_path, seed=11)
    git(task.root, "init", "-q", "-b", "main")
    git(task.root, "add", "-A")
    git(task.root, "commit", "-qm", "base")
    return task, git(task.root, "rev-parse", "HEAD")


def test_claude_code_is_sent_back_by_the_stop_hook_then_allowed_to_stop(tmp_path: Path) -> None:
    task, base = committed_task(tmp_path)
    gate = tmp_path / "gate.yaml"
    gate.write_text(f"verify: {task.project.test_command}\nbase: {base}\nmax_rounds: 2\n")

    finished, bodies, events = run_with_hook(tmp_path, task, gate)

    sent_back = [i for i, body in enumerate(bodies) if "hilbert's stop gate checked your work" in body]
    assert sent_back, finished.tail()  # the hook's reason reached the model as the next instruction
    reason = bodies[sent_back[0]]
    assert "verify: " in reason and "test(s) failed" in reason and "exit 1" in reason, reason[-3000:]
    assert bodies[-1].count("hilbert's stop gate checked your work") == 1  # sent back once, not twice
    assert finished.returncode == 0, finished.tail()
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "success", False)
    after = project_files(task.root)
    for test_file in task.project.test_files:
        assert after[test_file] == task.before[test_file]  # fixed for real, not by editing tests
    assert git(task.root, "status", "--porcelain") == f"M {task.project.bugs[0].file}"
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=task.root,
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert suite.returncode == 0, suite.stdout[-2000:]
    rounds = json.loads((tmp_path / "gate.yaml.rounds.json").read_text())
    assert rounds == {}  # the session's count was cleared when the gate passed
    # both runs of the hook (the block, the pass) succeeded in Claude Code's eyes: exit 0, JSON or nothing
    runs = hook_runs(events)
    assert [(r["exit_code"], r["outcome"]) for r in runs] == [(0, "success")] * 2, runs
    assert hook_error_notices(events) == [], events  # no "Stop hook error": the reason went as context
    assert "additionalContext" in runs[0]["output"] and '"decision"' not in runs[0]["output"], runs[0]


def test_a_failing_hook_still_sends_claude_code_back(tmp_path: Path) -> None:
    """The hook fails on a file that is not there (the held-out tests' folder, here): its one line on
    stderr with exit status 2 must reach the agent as a block, the gate failing closed. Claude Code
    reads an exit 2 whose stderr says `No such file` as a hook script gone missing instead: it lets
    the agent stop ungated and reports "Stop hook error"."""
    task, base = committed_task(tmp_path)
    gate = tmp_path / "gate.yaml"
    heldout = tmp_path / "heldout-not-mounted"
    verify = task.project.test_command
    gate.write_text(f"verify: {verify}\nbase: {base}\nheldout: {heldout}\nmax_rounds: 1\nunsandboxed: true\n")

    finished, bodies, events = run_with_hook(tmp_path, task, gate)

    assert finished.returncode == 0, finished.tail()
    runs = hook_runs(events)
    assert [r["exit_code"] for r in runs] == [2, 0], runs  # the error (a round), then the stop allowed
    assert "no such file" not in runs[0]["stderr"].lower(), runs[0]
    sent_back = [i for i, body in enumerate(bodies) if "heldout-not-mounted" in body]
    assert sent_back, finished.tail()  # the error reached the model as the reason to go on
    assert "Stop hook feedback" in bodies[sent_back[0]], bodies[sent_back[0]][-3000:]
