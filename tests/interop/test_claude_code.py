"""Claude Code (the real binary, pinned in tools/npm) fixes a one-bug sample project through hilbert's
fake server speaking Anthropic Messages, with the engineer responder driving its Bash/Read/Edit tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from interop_support import NPM_BIN, assert_fixed, clean_env, installed, run_client, sample_task, tool_calls

from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop
VERSION = "2.1.197"


def test_claude_code_fixes_the_bug_through_the_fake_server(tmp_path: Path) -> None:
    claude = installed(NPM_BIN / "claude", "Claude Code")
    task = sample_task(tmp_path, seed=11)
    with FakeServer("engineer", record=tmp_path / "requests.jsonl") as server:
        env = clean_env(
            tmp_path,
            ANTHROPIC_BASE_URL=server.base_url,
            ANTHROPIC_API_KEY="hilbert-fake-key",
            CLAUDE_CONFIG_DIR=str(tmp_path / "claude-config"),
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        )
        argv = [str(claude), "-p", task.project.task, "--output-format", "stream-json", "--verbose"]
        argv += ["--model", "claude-sonnet-4-5", "--permission-mode", "acceptEdits", "--allowedTools", "Bash"]
        finished = run_client(argv, cwd=task.root, env=env)
        requests = server.requests

    assert_fixed(task, finished, requests)
    assert finished.returncode == 0, finished.tail()
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "success", False)
    model_calls = [r for r in requests if r["protocol"] == "anthropic"]
    assert model_calls and all(r["path"].startswith("/v1/messages") for r in model_calls)
    assert all(r["headers"]["user-agent"].startswith(f"claude-cli/{VERSION} ") for r in model_calls)
    assert all(r["stream"] for r in model_calls)
    assert {"Bash", "Read", "Edit"} <= set(tool_calls(requests))
