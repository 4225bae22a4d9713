"""The fake server as a process (`python -m hilbert.testing.fake_server`) and the streams benchmark at
its smoke-test size."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import anthropic
import pytest

from hilbert.testing.fake_server.process import start_process

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
SERVER = [sys.executable, "-m", "hilbert.testing.fake_server"]


def test_serves_until_sigterm_and_records(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    command = [*SERVER, "--port", "0", "--responder", "echo", "--record", str(log), "--latency", "ttft=0.01"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("fake-server listening on http://127.0.0.1:") and "responder=echo" in line
        url = line.split()[3]
        with urllib.request.urlopen(url + "/v1/models", timeout=10) as response:
            assert json.load(response)["data"][0]["object"] == "model"
        with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
            message = client.messages.create(
                model="m", max_tokens=50, messages=[{"role": "user", "content": "ping"}]
            )
        assert message.content[0].text == "echo: ping"
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=10)
    assert server.returncode == 0, stderr
    assert [json.loads(line)["path"] for line in log.read_text().splitlines()] == [
        "/v1/models",
        "/v1/messages",
    ]


def test_rate_limit_flag_answers_real_429s() -> None:
    server, url = start_process("--responder", "echo", "--rate-limit", "rpm=1", env=ENV)
    try:
        with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
            task = [{"role": "user", "content": "ping"}]
            answer = client.messages.with_raw_response.create(model="m", max_tokens=50, messages=task)
            with pytest.raises(anthropic.RateLimitError) as refused:
                client.messages.create(model="m", max_tokens=50, messages=task)
    finally:
        server.terminate()
        server.communicate(timeout=10)  # waits, and closes its stdout pipe
    assert answer.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert refused.value.response.headers["retry-after"] == "60"


def test_bad_flags_exit_2_with_one_line() -> None:
    result = subprocess.run(
        [*SERVER, "--policy", "nope"], capture_output=True, text=True, env=ENV, timeout=30, check=False
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown responder 'nope'") and result.stderr.count("\n") == 1


def test_alone_it_knows_only_its_own_responders_and_says_where_the_others_are() -> None:
    """The fake server never imports the simulation; `hilbert fake-server` (the CLI) does."""
    result = subprocess.run(
        [*SERVER, "--responder", "engineer"], capture_output=True, text=True, env=ENV, timeout=30, check=False
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown responder 'engineer'") and "hilbert.sim" in result.stderr


def test_streams_benchmark_smoke() -> None:
    command = [
        sys.executable,
        str(ROOT / "bench" / "fake_server_streams.py"),
        "--streams",
        "8",
        "--latency",
        "none",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    figures = dict(item.split("=") for item in result.stdout.strip().splitlines()[-1].split())
    assert figures["streams"] == figures["completed"] == "8" and figures["max_open"] == "8"
