"""Review of the climb's harness (issue 19): a benchmark whose answer is not its own on the same input
is refused at the start, once, not by reverting every try; a benchmark that mostly waits is not looped
for a CPU budget its runs barely use."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from cli_support import run_cli
from git_support import git
from hilbert.climb import timer
from hilbert.climb.measure import Measurer
from hilbert.climb.state import ClimbFold
from hilbert.commands import Runner, Timeout
from hilbert.security.sandbox import detect
from hilbert.sim.optimiser.sample import TESTS_COMMAND, write_sample
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.workspaces import Git


def test_a_benchmark_that_answers_otherwise_on_the_same_input_is_refused_at_the_start(tmp_path: Path) -> None:
    repo = write_sample(tmp_path / "repo")
    db = tmp_path / "log" / "hilbert.db"
    env = {
        **os.environ,
        "HILBERT_HOME": str(tmp_path / "home"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    clock = "echo started at $(date +%s%N); echo 1"  # a timestamp: never the same answer twice
    with FakeServer("optimiser:ideas=dict+rename") as server:
        ran = run_cli(
            "climb", "--repo", str(repo), "--metric", clock, "--explorers", "1", "--tries", "2",
            "--repeat", "2", "--test-command", TESTS_COMMAND, "--unsandboxed",
            "--model", f"openai:fake@{server.openai_base_url}", "--db", str(db), "--yes",
            cwd=tmp_path, env=env,
        )  # fmt: skip
    assert ran.returncode != 0, ran.stdout + ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert "Traceback" not in ran.stderr and lines[0].startswith("hilbert: error:"), ran.stderr
    assert "answered otherwise on the same input" in lines[0] and "started at" in lines[0], lines[0]
    with EventStore.open(db) as store:
        assert store.events(kinds=["try_started"]) == []  # refused before any try was made


def test_a_benchmark_that_mostly_waits_is_not_looped_for_cpu_it_does_not_use(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    with out.open("w") as report:
        argv = [
            sys.executable,
            "-I",
            "-S",
            timer.__file__,
            "--report",
            str(report.fileno()),
            "--min-cpu",
            "0.05",
        ]
        done = subprocess.run(
            [*argv, "--", "bash", "-c", "sleep 0.8; echo 3"],
            pass_fds=(report.fileno(),),
            timeout=60,
            check=False,
        )
    assert done.returncode == 0
    found = json.loads(out.read_text())
    # each run uses a few ms of CPU: a loop to 50 ms of it would wait ~15 x 0.8 s
    assert found["status"] == 0 and 1 <= found["runs"] <= 3, found
    assert found["wall"] >= 0.8 and found["cpu"] < 0.8, found


def test_a_holdout_that_answers_otherwise_on_the_same_input_is_not_used(tmp_path: Path) -> None:
    repo = write_sample(tmp_path / "repo")
    sealed = tmp_path / "sealed"
    sealed.mkdir()
    (sealed / "holdout.sh").write_text("echo drawn $RANDOM$RANDOM; echo 1\n")  # its own draw: not the seed's
    db = tmp_path / "log" / "hilbert.db"
    env = {
        **os.environ,
        "HILBERT_HOME": str(tmp_path / "home"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    with FakeServer("optimiser:ideas=rename") as server:
        ran = run_cli(
            "climb", "--repo", str(repo), "--metric", "echo 1", "--explorers", "1", "--tries", "1",
            "--repeat", "2", "--holdout-metric", f"bash {sealed / 'holdout.sh'}",
            "--test-command", TESTS_COMMAND, "--unsandboxed",
            "--model", f"openai:fake@{server.openai_base_url}", "--db", str(db), "--yes",
            cwd=tmp_path, env=env,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    with EventStore.open(db) as store:
        state = ClimbFold(store, store.events(kinds=["climb_started"])[0].run).catch_up()
    # every try the metric found better would be reverted as overfit for it: the holdout is set aside
    assert state.holdout_error.startswith("the holdout answered otherwise on the same input"), (
        state.holdout_error
    )
    assert state.holdout_base is None and "drawn" in state.holdout_error


def test_a_sandboxed_loop_keeps_its_tmpdir_when_the_measurement_lies_under_tmp(tmp_path: Path) -> None:
    """The stopwatch empties the sandbox's private /tmp between runs, not the folders bound into it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    # TMPDIR must be there on every run; what a run left in the sandbox's own /tmp must not
    script = "mktemp > /dev/null || exit 1\n[ -e /tmp/seen ] && echo remembered || echo ok\n"
    script += "touch /tmp/seen 2> /dev/null || true\n"
    (repo / "m.sh").write_text(script)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a benchmark")
    runner = Runner(detect(), {**os.environ})
    measurer = Measurer(
        repo,
        "bash m.sh",
        runner,
        Git(home=tmp_path / "home"),
        tmp_path / "scratch",
        Timeout(60, "t"),
        kind="time",
    )
    measured = asyncio.run(measurer.measure(git(repo, "rev-parse", "HEAD"), 2, "m"))
    assert not measured.error, measured.error
    assert measured.answers == ("ok", "ok") and all(runs > 1 for runs in measured.runs), measured
