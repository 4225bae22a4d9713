"""A real `hilbert agent` run with keys in its environment: its commands cannot see them, and neither
what it prints live, its summary, its event log on disk nor `hilbert log` shows a key, whether it came
from the environment or is merely key-shaped output of a command or words of the model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.testing.fake_server import FakeServer

MODEL_KEY = "sk-" + "ant-api03-" + "e2eKey0" * 5  # the model key hilbert itself uses
DEPLOY_TOKEN = "dtok-" + "Hq4v81PzXk"  # a secret of the person's, not key-shaped
KEY = "gh" + "p_" + "E2e9" * 9  # key-shaped output of a command


def hilbert(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env=env)


def test_hilbert_agent_never_shows_nor_logs_a_key(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "deploy.sh").write_text(f"curl -H 'X-Token: {DEPLOY_TOKEN}' https://example.invalid\n")
    script = tmp_path / "script.json"
    turns = [
        {
            "tool_calls": [
                {"name": "shell", "arguments": {"command": 'echo "seen:[$DEPLOY_TOKEN$ANTHROPIC_API_KEY]"'}}
            ]
        },
        {"tool_calls": [{"name": "shell", "arguments": {"command": f"printf gh; echo {KEY[2:]}"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "deploy.sh"}}]},
        {
            "text": f"The deploy token is {DEPLOY_TOKEN}.",
            "tool_calls": [
                {"name": "finish", "arguments": {"claim": f"found {KEY}", "evidence": "[exit 0]"}}
            ],
        },
    ]
    script.write_text(json.dumps(turns))
    base_env = {
        k: v for k, v in command_env(hilbert_python_first=True).items() if not k.startswith("HILBERT_")
    }
    base_env["HOME"] = str(tmp_path)
    db = tmp_path / "log.db"
    with FakeServer(f"scripted:file={script}") as server:
        ran = hilbert(
            "agent",
            "find the deploy token",
            "--model",
            f"anthropic:fake@{server.base_url}",
            "--workspace",
            str(tmp_path / "ws"),
            "--db",
            str(db),
            cwd=tmp_path,
            env={**base_env, "ANTHROPIC_API_KEY": MODEL_KEY, "DEPLOY_TOKEN": DEPLOY_TOKEN},
        )
        requests = server.requests
    assert ran.returncode == 0, ran.stdout + ran.stderr
    tool_results = json.dumps([r.get("body") for r in requests])
    assert "seen:[]" in tool_results  # the command saw neither variable: empty expansions
    assert KEY in tool_results  # the model itself was sent the command's output as it was

    shown = hilbert("log", "--db", str(db), cwd=tmp_path, env=base_env)  # no secret known to this one
    assert shown.returncode == 0, shown.stderr
    on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("log.db*"))
    for where, text in [
        ("agent", ran.stdout + ran.stderr),
        ("log", shown.stdout),
        ("disk", on_disk.decode(errors="replace")),
    ]:
        for secret in (MODEL_KEY, DEPLOY_TOKEN, KEY):
            assert secret not in text, (where, secret)
    assert "claim: found ***" in ran.stdout and "***" in shown.stdout
