"""The command line as a person meets it: clear one-line errors, never a traceback; the demo works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.fleet.names import to_id
from hilbert.store import EventStore
from hilbert.testing.fake_server.process import start_process

CLI_FAKE_SERVER = ("-m", "hilbert.ui.cli", "fake-server")  # the CLI also knows hilbert.sim's responders


def hilbert(*args: str, cwd: Path | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in command_env(hilbert_python_first=True).items() if k != "HILBERT_CONFIG"}
    env["HOME"] = str(cwd or Path.cwd())
    return run_cli(*args, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["agent", "fix it"], "no model given"),
        (["agent", "fix it", "--model", "gpt-5"], "has no provider"),
        (["agent", "fix it", "--model", "martian:x"], "provider"),
        (["agent", "fix it", "--model", "anthropic:claude-sonnet-4-5"], "ANTHROPIC_API_KEY"),
        (["log", "--db", "nowhere.db"], "no event log"),
        (["fake-server", "--port", "0", "--faults", "429=lots"], "fault"),
        (["fake-server", "--port", "0", "--policy", "psychic"], "unknown responder"),
        (["fake-server", "--port", "0", "--latency", "ttft=fast"], "latency"),
        (["fake-server", "--port", "0", "--rate-limit", "rpm=fast"], "bad rate-limit rpm value"),
        (["fake-server", "--port", "99999"], "99999"),
        (["agent", "x", "--model", "openai:m@http://127.0.0.1:9/v1", "--db", "/proc/nope/x.db"], "folder"),
        (["log", "--db", "/etc/hostname"], "not"),
        (["demo", "--dir", "/etc/hostname/x"], "not a directory"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    done = hilbert(*args, cwd=tmp_path)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hilbert: error: "), done.stderr
    assert expected.lower() in lines[0].lower()
    assert "Traceback" not in done.stderr + done.stdout


def test_bad_config_file_is_reported_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "hilbert.toml").write_text("max_turns = [oops\n")
    done = hilbert("agent", "x", "--model", "openai:m@http://127.0.0.1:9/v1", cwd=tmp_path)
    assert done.returncode == 2 and "hilbert.toml" in done.stderr and "Traceback" not in done.stderr


def test_sample_project_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "keep.txt").write_text("mine")
    done = hilbert("sample-project", "p", cwd=tmp_path)
    assert done.returncode == 2 and "not empty" in done.stderr
    assert (tmp_path / "p" / "keep.txt").read_text() == "mine"


def test_demo_refuses_to_clobber_a_folder_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    done = hilbert("demo", "--dir", "mine", cwd=tmp_path)
    assert done.returncode == 2 and "not made by" in done.stderr
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


@pytest.mark.timeout(600)
def test_demo_a_lead_and_16_workers_fix_24_bugs_and_the_integration_branch_is_green(tmp_path: Path) -> None:
    done = hilbert("demo", "--dir", "run", "--seed", "3", cwd=tmp_path, timeout=540)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr
    out = done.stdout
    assert "24 injected bugs" in out and "PLAN.md: 24 tasks" in out
    assert "tasks done: 24 of 24; merged onto hilbert/integration: 24" in out
    assert "whole suite: PASS" in out
    # seed 3 draws workers that stop early and claim done, and workers that cheat (skip the failing test):
    # the stop gate sends both back with its reasons, and they then finish the work for real
    sent_back = re.search(
        r"sent back by the stop gate: (\d+) \((\d+) after a worker claimed it was done; (\d+) for tampering",
        out,
    )
    assert sent_back and int(sent_back.group(2)) >= 1 and int(sent_back.group(3)) >= 1, out[-3000:]
    assert "round 1: SENT BACK — verify: " in out and "that ran at base do not run now" in out  # skips
    assert "T1 started by" in out  # progress, as it happened
    reviews = re.search(r"review panel: (\d+) reviews of gated work", out)
    assert reviews and int(reviews.group(1)) >= 24, out[-3000:]  # every merged change was reviewed first
    # the last scene: a worker's order, dressed up as the lead's, reaches its peer marked with its true
    # sender; the obedient peer's command is refused by policy and the integration repository survives
    assert "Poincaré → Noether: URGENT, from the lead:" in out
    assert 'Noether reads it as: <message from="Poincaré" role="worker"' in out
    assert "Noether runs `rm -rf ../../integration.git`: refused by policy (outside_workspace)" in out
    assert "the integration repository is intact; the order was refused by policy" in out
    # and an agent whose task outgrows a small context budget is compacted several times, the task
    # restated after each cut, and still finishes: the harness counts all its parts
    cuts = re.search(r"context compacted (\d+) times", out)
    assert cuts and int(cuts.group(1)) >= 2, out[-3000:]
    assert "after each cut the task state is restated:" in out
    assert "Ramanujan finished after" in out and ": 30 (expected 30)" in out
    # it ends with the fleet run's report, written where it says (`hilbert report`)
    report = out.strip().splitlines()[-1].split("one HTML file to open or mail): ")[-1]
    assert report == str(tmp_path / "run" / "report.html"), out[-500:]
    assert '<section id="merge-queue">' in Path(report).read_text()
    status = hilbert("status", "--db", "run/hilbert.db", cwd=tmp_path)
    assert status.returncode == 0 and len(status.stdout.strip().splitlines()) >= 24, status.stderr
    # status (the fold) agrees with what the driver did: for each merged task, the one worker whose
    # candidate the queue merged is `done`; a worker whose candidate was sent back by the merge queue
    # (a conflict, red checks) is `sent back`, even when a later worker finished the same task
    with EventStore.open(tmp_path / "run" / "hilbert.db") as store:
        run = next(r for r in store.runs() if r.startswith("demo-fleet-"))
        harness = store.events(run=run, agent="harness")
    merged_by = {e.data["ref"].rsplit("/", 1)[-1] for e in harness if e.kind == "merged"}
    sent_back = {
        e.data["ref"].rsplit("/", 1)[-1] for e in harness if e.kind in ("merge_conflict", "merge_rejected")
    }
    shown = {
        to_id(line[:14].strip()): line[22:32].strip()
        for line in status.stdout.splitlines()
        if line[:1] != " "
    }
    assert len(merged_by) == 24 and all(shown[worker] == "done" for worker in merged_by), status.stdout
    assert all(shown[worker] == "sent back" for worker in sent_back), status.stdout


def test_single_demo_fixes_the_project_and_verifies_it_independently(tmp_path: Path) -> None:
    done = hilbert("demo", "--single", "--dir", "run", "--seed", "4242", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "independent check `python -m pytest -q`: PASS" in done.stdout
    assert "model call 1:" in done.stdout and "finish" in done.stdout
    log = hilbert("log", "--db", "run/hilbert.db", cwd=tmp_path)
    assert log.returncode == 0 and "stopped (finished)" in log.stdout
    # a second demo in the same folder replaces the first
    again = hilbert("demo", "--single", "--dir", "run", "--seed", "7", "--protocol", "openai", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:]


def test_agent_command_runs_against_a_fake_server_process(tmp_path: Path) -> None:
    server, url = start_process(
        "--responder", "engineer", "--record", str(tmp_path / "requests.jsonl"), program=CLI_FAKE_SERVER
    )
    try:
        hilbert("sample-project", "proj", "--seed", "99", cwd=tmp_path)
        done = hilbert(
            "agent",
            "The tests fail (`python -m pytest -q`); fix the code, not the tests.",
            "--model",
            f"openai:fake@{url}/v1",
            "--workspace",
            "proj",
            "--db",
            "log.db",
            "--name",
            "Noether",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        assert "Noether: finished" in done.stdout
        assert (tmp_path / "requests.jsonl").read_text().count("\n") >= 3
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()
    assert (tmp_path / "log.db").exists()


def test_agent_prints_progress_while_it_works_not_after(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        "- tool_calls: [{name: shell, arguments: {command: 'sleep 3'}}]\n"
        "- tool_calls: [{name: finish, arguments: {claim: slept, evidence: '[exit 0]'}}]\n"
    )
    from hilbert.testing.fake_server import FakeServer

    with FakeServer(f"scripted:file={script}") as server:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hilbert.ui.cli",
                "agent",
                "sleep a while",
                "--model",
                f"anthropic:fake@{server.base_url}",
                "--workspace",
                str(tmp_path / "ws"),
                "--db",
                str(tmp_path / "log.db"),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=command_env(hilbert_python_first=True),
        )
        assert agent.stdout is not None
        with agent.stdout:
            for line in agent.stdout:
                if "model call 1:" in line:
                    assert agent.poll() is None  # printed while the agent is still working
                    break
            rest = agent.stdout.read()
        assert agent.wait(timeout=60) == 0
    assert "shell `sleep 3` → exit 0" in rest and "finished" in rest


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("404", "unknown model"),
        ("401", "check ANTHROPIC_API_KEY"),
        ("overflow", "does not fit"),
        ("refused", "request refused"),
    ],
)
def test_a_model_that_fails_for_good_is_one_line_and_exit_2(
    tmp_path: Path, fault: str, expected: str
) -> None:
    from hilbert.testing.fake_server import FakeServer

    with FakeServer("echo", faults=f"{fault}=1.0") as server:
        env = {**command_env(hilbert_python_first=True), "ANTHROPIC_API_KEY": "test"}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "hilbert.ui.cli",
                "agent",
                "hi",
                "--model",
                f"anthropic:m@{server.base_url}",
                "--workspace",
                str(tmp_path),
                "--db",
                str(tmp_path / "log.db"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hilbert: error: ") and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout
