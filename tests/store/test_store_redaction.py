"""Nothing secret reaches the event log: an agent whose model reply, tool output and claim hold a key
(the value of a secret variable in the environment, and a key-shaped string) leaves only `***` in the
SQLite file and its write-ahead log, in what the store reads back, and in `hilbert log`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hilbert.agent.loop import run_agent
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.models import make_model
from hilbert.models.types import Message, ToolCall
from hilbert.security.redact import Redactor
from hilbert.store import EventStore, rebuild_conversation
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responders import ScriptedResponder

SECRET = "tok-" + "7f3kQ9zLw2Rm"  # the value of DEPLOY_TOKEN: known only from the environment
KEY = "gh" + "p_" + "Zq81" * 9  # key-shaped: redacted whoever's it is
MARKER = "plain-marker-4711"  # written next to them: shows the raw bytes do hold the log's text


def raw_log_bytes(db: Path) -> bytes:
    """Everything SQLite keeps for the log: the database file and its write-ahead log."""
    return b"".join(path.read_bytes() for path in (db, db.with_name(db.name + "-wal")) if path.exists())


def test_events_and_messages_are_redacted_before_they_are_written(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with EventStore.open(db, redactor=Redactor.from_env({"DEPLOY_TOKEN": SECRET})) as store:
        event = store.append(
            "r", "a", "tool_result", {"arguments": {"command": f"deploy {SECRET}", KEY: [MARKER]}}
        )
        call = ToolCall("c1", "shell", {"command": f"echo {KEY}"})
        hashes = store.put_messages(
            [
                Message("assistant", f"using {SECRET} and {KEY} ({MARKER})", tool_calls=(call,)),
                Message("tool", f"{KEY}\n", tool_call_id="c1", name="shell"),
            ]
        )
        assert db.with_name("log.db-wal").stat().st_size > 0  # the commits are in the WAL, not yet merged
        written = raw_log_bytes(db)
        assert MARKER.encode() in written
        assert SECRET.encode() not in written and KEY.encode() not in written

        assert event.data == {"arguments": {"command": "deploy ***", "***": [MARKER]}}
        assert store.events(run="r")[0].data == event.data
        reply, tool = store.get_messages(hashes)
        assert reply.content == f"using *** and *** ({MARKER})"
        assert reply.tool_calls[0].arguments == {"command": "echo ***"}
        assert tool.content == "***\n"
    written = raw_log_bytes(db)  # after close: checkpointed into the database file
    assert MARKER.encode() in written and SECRET.encode() not in written and KEY.encode() not in written


def test_by_default_the_store_redacts_the_secrets_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HILBERT_TEST_API_KEY", SECRET)
    with EventStore.open(tmp_path / "log.db") as store:
        assert store.append("r", "a", "note", {"text": f"key={SECRET}"}).data == {"text": "key=***"}
    assert SECRET.encode() not in raw_log_bytes(tmp_path / "log.db")


def test_an_agent_that_reads_a_secret_leaves_none_in_the_log_nor_in_hilbert_log(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / ".env").write_text(f"DEPLOY_TOKEN={SECRET}\n")
    turns = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": ".env"}}]},
        # The command builds the key-shaped string, so only its output holds it whole.
        {"tool_calls": [{"name": "shell", "arguments": {"command": f"printf gh; echo {KEY[2:]}"}}]},
        {
            "text": f"The token is {SECRET}.",
            "tool_calls": [{"name": "finish", "arguments": {"claim": f"found {KEY}", "evidence": MARKER}}],
        },
    ]
    db = tmp_path / "log.db"
    store = EventStore.open(db, redactor=Redactor.from_env({"DEPLOY_TOKEN": SECRET}))
    with FakeServer(ScriptedResponder.from_turns(turns)) as server:
        result = asyncio.run(
            run_agent(
                run="r",
                agent="Noether",
                task="find the token",
                model=make_model(f"anthropic:fake@{server.base_url}", env={}),
                toolbox=ToolBox(workspace, runner=Runner.unsandboxed()),
                store=store,
                policies=[],
            )
        )
    assert result.status == "finished" and result.claim == f"found {KEY}"  # the agent itself saw it all
    outputs = [m.content for m in rebuild_conversation(store, "r", "Noether") if m.role == "tool"]
    assert outputs[0].endswith("DEPLOY_TOKEN=***") and outputs[1].endswith("\n***\n")  # read, redacted
    written = raw_log_bytes(db)
    assert MARKER.encode() in written and SECRET.encode() not in written and KEY.encode() not in written
    store.close()

    # `hilbert log` reads the log with no secret in its own environment: what it shows was redacted on write.
    env = {k: v for k, v in command_env(hilbert_python_first=True).items() if not k.startswith("HILBERT_")}
    shown = subprocess.run(
        [sys.executable, "-m", "hilbert.ui.cli", "log", "--db", str(db)],
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    assert "***" in shown.stdout and "read_file" in shown.stdout
    assert SECRET not in shown.stdout + shown.stderr and KEY not in shown.stdout + shown.stderr
    assert not any(
        SECRET in p.read_text(errors="replace") for p in tmp_path.glob("log.db*") if os.path.isfile(p)
    )
