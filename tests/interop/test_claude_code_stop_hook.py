"""The stop gate as Claude Code's Stop hook: the real binary (pinned in tools/npm), driven through the
fake server by an engineer that stops early and claims done. `hilbert hook stop` sends it back once with
the gate's reasons; it then fixes the bug for real, and the hook lets it stop."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from interop_support import NPM_BIN, clean_env, installed, project_files, run_client, sample_task

from git_support import git
from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop


def test_claude_code_is_sent_back_by_the_stop_hook_then_allowed_to_stop(tmp_path: Path) -> None:
    claude = installed(NPM_BIN / "claude", "Claude Code")
    task = sample_task(tmp_path, seed=11)
    git(task.root, "init", "-q", "-b", "main")
    git(task.root, "add", "-A")
    git(task.root, "commit", "-qm", "base")
    base = git(task.root, "rev-parse", "HEAD")
    gate = tmp_path / "gate.yaml"
    gate.write_text(f"verify: {task.project.test_command}\nbase: {base}\nmax_rounds: 2\n")
    config = tmp_path / "claude-config"
    config.mkdir()
    hook = f"{sys.executable} -m hilbert.ui.cli hook stop --gate {gate}"
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
        argv += ["--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits", "--allowedTools", "Bash"]
        finished = run_client(argv, cwd=task.root, env=env)
        requests = server.requests

    bodies = [json.dumps(r.get("body")) for r in requests if r.get("protocol") == "anthropic"]
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
