"""mini-swe-agent (the real `mini` CLI, pinned in .tools/mini-swe-agent) fixes a one-bug sample project
through hilbert's fake server speaking OpenAI Chat Completions, with the engineer responder driving its
one `bash` tool and ending with mini-swe-agent's submit command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from interop_support import VENVS, assert_fixed, clean_env, installed, run_client, sample_task, tool_calls

from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def test_mini_swe_agent_fixes_the_bug_through_the_fake_server(tmp_path: Path) -> None:
    mini = installed(VENVS / "mini-swe-agent" / "bin" / "mini", "mini-swe-agent")
    task = sample_task(tmp_path, seed=13)
    trajectory = tmp_path / "trajectory.json"
    with FakeServer("engineer", record=tmp_path / "requests.jsonl") as server:
        env = clean_env(
            tmp_path,
            OPENAI_API_KEY="hilbert-fake-key",
            MSWEA_CONFIGURED="true",
            MSWEA_COST_TRACKING="ignore_errors",
            MSWEA_GLOBAL_CONFIG_DIR=str(tmp_path / "mswea-config"),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        argv = [str(mini), "--yolo", "--exit-immediately", "--model", "openai/hilbert-engineer"]
        argv += ["-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={server.openai_base_url}"]
        argv += ["--output", str(trajectory), "--task", task.project.task]
        finished = run_client(argv, cwd=task.root, env=env)
        requests = server.requests

    assert_fixed(task, finished, requests)
    assert finished.returncode == 0, finished.tail()
    assert json.loads(trajectory.read_text())["info"]["exit_status"] == "Submitted", finished.tail()
    model_calls = [r for r in requests if r["protocol"] == "openai-chat"]
    assert model_calls and all(r["path"] == "/v1/chat/completions" for r in model_calls)
    assert all(r["headers"]["user-agent"].startswith("OpenAI/Python ") for r in model_calls)  # via litellm
    assert all(
        not r["stream"] and [t["function"]["name"] for t in r["body"]["tools"]] == ["bash"]
        for r in model_calls
    )
    assert set(tool_calls(requests)) == {"bash"}
    assert requests[-1]["reply"]["tool_calls"][0]["arguments"] == {"command": SUBMIT}
