"""Codex CLI (the real binary, pinned in tools/npm) fixes a one-bug sample project through hilbert's
fake server speaking OpenAI Responses, with the engineer responder driving exec_command and apply_patch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from interop_support import NPM_BIN, assert_fixed, clean_env, installed, run_client, sample_task, tool_calls

from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop
VERSION = "0.171.0"
MODEL = "gpt-5.5"  # a model Codex knows, so that it offers its freeform apply_patch tool


def test_codex_fixes_the_bug_through_the_fake_server(tmp_path: Path) -> None:
    codex = installed(NPM_BIN / "codex", "Codex CLI")
    task = sample_task(tmp_path, seed=12)
    with FakeServer("engineer", record=tmp_path / "requests.jsonl") as server:
        provider = (
            f'{{name="hilbert-fake", base_url="{server.openai_base_url}", env_key="HILBERT_FAKE_KEY", '
            'wire_api="responses"}'
        )
        env = clean_env(
            tmp_path, CODEX_HOME=str(tmp_path / "codex-home"), HILBERT_FAKE_KEY="hilbert-fake-key"
        )
        (tmp_path / "codex-home").mkdir()
        argv = [
            str(codex),
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
        ]
        argv += ["-c", "model_provider=hilbert-fake", "-c", f"model_providers.hilbert-fake={provider}"]
        argv += ["-c", "analytics.enabled=false", "-m", MODEL, task.project.task]
        finished = run_client(argv, cwd=task.root, env=env)
        requests = server.requests

    assert_fixed(task, finished, requests)
    assert finished.returncode == 0, finished.tail()
    events = [json.loads(line) for line in finished.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "turn.completed", finished.tail()
    assert any(e["type"] == "item.completed" and e["item"]["type"] == "file_change" for e in events)
    model_calls = [r for r in requests if r["protocol"] == "openai-responses"]
    assert model_calls and all(r["path"] == "/v1/responses" for r in model_calls)
    assert all(r["headers"]["user-agent"].startswith(f"codex_exec/{VERSION} ") for r in model_calls)
    assert {"exec_command", "apply_patch"} <= set(tool_calls(requests))
