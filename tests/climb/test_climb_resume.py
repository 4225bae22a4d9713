"""A climb killed mid-try and run again with `--resume`: it goes on from its log — the try in flight is
reverted as interrupted (not counted), fresh tries take its place, the best still moves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_support import run_cli
from hilbert.climb.state import ClimbFold
from hilbert.sim.optimiser.sample import METRIC, TESTS_COMMAND, write_sample
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer


def _wait_for_try(db: Path, child: subprocess.Popen[str], deadline_s: float = 60.0) -> str:
    """The run's id once its first try has started (polling the log the child writes)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert child.poll() is None, "the climb ended before its first try started"
        if db.exists():
            with EventStore.open(db) as store:
                started = store.events(kinds=["try_started"])
                if started:
                    return started[0].run
        time.sleep(0.05)
    raise AssertionError("no try started in time")


def test_a_killed_climb_resumes_from_its_log(tmp_path: Path) -> None:
    repo = write_sample(tmp_path / "repo")
    db = tmp_path / "log" / "hilbert.db"
    env = {
        **os.environ,
        "HILBERT_HOME": str(tmp_path / "home"),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    with FakeServer("optimiser:ideas=dict+rename") as server:
        model = f"openai:fake@{server.openai_base_url}"
        common = ["--test-command", TESTS_COMMAND, "--unsandboxed", "--model", model, "--db", str(db)]
        args = ["climb", "--repo", str(repo), "--metric", METRIC, "--explorers", "1", "--tries", "2"]
        child = subprocess.Popen(
            [sys.executable, "-m", "hilbert.ui.cli", *args, "--repeat", "3", *common, "--yes"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            run = _wait_for_try(db, child)
        finally:
            child.send_signal(signal.SIGKILL)
            child.communicate()
        resumed = run_cli("climb", "--run", run, "--resume", *common, cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    with EventStore.open(db) as store:
        state = ClimbFold(store, run).catch_up()
    assert state.finished is not None and state.finished.reason == "all 2 tries made"
    assert state.tries[1].stage == "interrupted"
    assert sorted(t.no for t in state.done if t.stage != "interrupted") == [2, 3]
    assert [t.idea for t in state.kept] == ["count complements in one pass with a dict"]
    assert state.best_median is not None and state.baseline_median is not None
    assert state.best_median < state.baseline_median - 2 * state.noise
