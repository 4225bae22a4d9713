"""aider (the real CLI, pinned in .tools/aider) fixes a one-bug sample project through hilbert's fake
server speaking OpenAI Chat Completions (streamed). aider offers no tools: it shows the files in the
chat, applies the SEARCH/REPLACE blocks of each reply, and with `--auto-test` runs the tests after an
edit and sends failures back (3 times a message). Like a person at the prompt, the test waits for it,
types the task, then `/test` until the tests pass (a failing run goes to the engineer, who goes on; a
passing one sends nothing), then `/exit`: `/test` lines typed ahead would each run the suite again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from interop_support import VENVS, assert_fixed, clean_env, converse, installed, sample_task

from hilbert.testing.fake_server import FakeServer

pytestmark = pytest.mark.interop
MODEL = "openai/hilbert-engineer"
PROMPT = "\ndiff> "  # aider's prompt without a terminal: its edit format when not the model's own, "> "
TEST_PROMPTS = 8  # the most `/test` lines after the task: each allows up to 4 more replies


def test_aider_fixes_the_bug_through_the_fake_server(tmp_path: Path) -> None:
    aider = installed(VENVS / "aider" / "bin" / "aider", "aider")
    task = sample_task(tmp_path, seed=14)
    test_command = task.project.test_command
    metadata = tmp_path / "model-metadata.json"  # known limits and prices: aider fetches none
    metadata.write_text(
        json.dumps(
            {
                MODEL: {
                    "max_input_tokens": 1_000_000,
                    "max_output_tokens": 32_000,
                    "litellm_provider": "openai",
                    "mode": "chat",
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                }
            }
        )
    )
    with FakeServer("engineer", record=tmp_path / "requests.jsonl") as server:
        env = clean_env(tmp_path, LITELLM_LOCAL_MODEL_COST_MAP="True")
        argv = [str(aider), "--model", MODEL, "--openai-api-base", server.openai_base_url]
        argv += ["--openai-api-key", "hilbert-fake-key", "--model-metadata-file", str(metadata)]
        argv += ["--edit-format", "diff", "--test-cmd", test_command, "--auto-test", "--no-git"]
        argv += ["--yes-always", "--no-check-update", "--no-show-model-warnings", "--analytics-disable"]
        argv += ["--no-show-release-notes", "--no-pretty", "--no-fancy-input", "--no-suggest-shell-commands"]
        argv += ["--max-chat-history-tokens", "1000000", "--map-tokens", "0", "--no-detect-urls"]
        argv += ["--input-history-file", str(tmp_path / "aider.input.history")]
        argv += ["--chat-history-file", str(tmp_path / "aider.chat.history.md")]
        # aider without git runs the tests in the common folder of the files it may edit: the README
        # makes that the project's root; the tests are shown read-only.
        argv += [
            "README.md",
            *task.project.source_files,
            *(f"--read={test}" for test in task.project.test_files),
        ]

        def typed() -> Iterator[str]:  # runs on at each prompt: aider waits for a line
            yield task.project.task
            for _ in range(TEST_PROMPTS):
                asked = len(server.requests)
                yield f"/test {test_command}"
                if len(server.requests) == asked:  # the tests passed: aider had nothing to send
                    break
            yield "/exit"

        finished = converse(argv, cwd=task.root, env=env, prompt=PROMPT, lines=typed())
        requests = server.requests

    assert_fixed(task, finished, requests)
    assert finished.returncode == 0 and finished.typed[-1:] == ("/exit",), finished.tail()
    model_calls = [r for r in requests if r["protocol"] == "openai-chat"]
    assert model_calls and all(r["path"] == "/v1/chat/completions" for r in model_calls)
    assert all(r["headers"]["user-agent"].startswith("OpenAI/Python ") for r in model_calls)  # via litellm
    assert all(r["stream"] and not r["body"].get("tools") for r in model_calls)
    assert any("<<<<<<< SEARCH" in (r["reply"] or {}).get("text", "") for r in model_calls)
