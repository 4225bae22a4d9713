"""Budgets through the real CLI against the fake engineer (`hilbert.fleet.budget`): a soft cap on a task
pauses its worker and asks; `hilbert status` shows it waiting and how to answer; `hilbert approve`
raises it and the live run goes on; killed while it waits on a second cap, the run still waits once
resumed, and the answer lets it go on and merge. A hard cap halts the task with its work kept. A model
with no known price is refused for a run with a dollar budget, in one line, unless hilbert.toml
prices it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from fleet_support import commit_all

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.sim.sample import generate_sample_project
from hilbert.testing.fake_server import FakeServer

PRICE = '[prices."openai:fake"]\ninput = 1.0\noutput = 4.0\n'  # USD per million tokens
SETTINGS = (
    '[fleet]\nmax_attempts = 1\n\n[gate]\nrounds = 1\ndifferential = false\n\n[commands]\ntest = "true"\n\n'
)


def env(cwd: Path) -> dict[str, str]:
    return {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(cwd / "home")}


def hilbert(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env=env(cwd), timeout=300)


def status_until(cwd: Path, run: str, wanted: str, *, within_s: float = 120.0) -> str:
    """`hilbert status --run RUN` until it says `wanted` (its output then)."""
    deadline = time.monotonic() + within_s
    while True:
        shown = hilbert("status", "--run", run, cwd=cwd).stdout
        if wanted in shown or time.monotonic() > deadline:
            return shown
        time.sleep(0.5)


def start(cwd: Path, args: list[str], environment: dict[str, str]) -> subprocess.Popen[str]:
    """`hilbert ARGS` in the background, its output captured."""
    command = [sys.executable, "-m", "hilbert.ui.cli", *args]
    return subprocess.Popen(
        command, cwd=cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def stop(process: subprocess.Popen[str]) -> None:
    """Killed and reaped, its pipe closed: a process left running when a check failed must not turn
    into another test's failure (a ResourceWarning, raised where it is collected)."""
    process.kill()
    process.communicate()


FINISH_S = 600  # a run that goes on after an answer: minutes on a machine at load 10, not seconds


def the_run(cwd: Path, before: set[str], within_s: float = 60.0) -> str:
    deadline = time.monotonic() + within_s
    runs = cwd / "home" / "runs"
    while time.monotonic() < deadline:
        new = {p.name for p in runs.iterdir()} - before if runs.is_dir() else set()
        if new:
            return new.pop()
        time.sleep(0.1)
    raise AssertionError("no run started")


def test_a_soft_cap_asks_and_approve_resumes_a_hard_cap_halts_with_the_work_kept_unpriced_is_refused(
    tmp_path: Path,
) -> None:
    project = generate_sample_project(tmp_path / "repo", 3, bugs=1)
    commit_all(project.path)
    bug = project.bugs[0]
    (tmp_path / "PLAN.md").write_text(
        f"# make the tests pass\n\n## T1 — Fix {bug.function}\n\n"
        f"```yaml hilbert-task\nverify: python -m pytest -q {bug.tests[0]}\nclaims: [{bug.file}]\n```\n"
    )
    (tmp_path / "hilbert.toml").write_text(SETTINGS)
    with FakeServer("engineer") as engineer:
        model = f"openai:fake@{engineer.openai_base_url}"
        run_args = ["run", "--plan", "PLAN.md", "--repo", "repo", "--workers", "1", "--model", model]
        # no price known and a dollar budget: refused before anything starts
        unpriced = hilbert(*run_args, "--budget", "task_usd=0.0001", cwd=tmp_path)
        assert unpriced.returncode == 2, unpriced.stdout[-2000:] + unpriced.stderr
        assert f"no price known for {model}: the run's dollar budget (budgets.task_usd)" in unpriced.stderr
        assert len(unpriced.stderr.strip().splitlines()) == 1 and '[prices."openai:fake"]' in unpriced.stderr
        assert not (tmp_path / "home" / "runs").exists()

        # soft caps, priced now: the task's first model call reaches its dollars; its worker waits for you
        (tmp_path / "hilbert.toml").write_text(
            SETTINGS + "[budget]\ntask_usd = 0.0001\ntask_turns = 6\n\n" + PRICE
        )
        crash = {**env(tmp_path), "HILBERT_CRASH_AT": "budget_asked:2"}  # dies once it asks again: a kill
        live = start(tmp_path, run_args, crash)
        try:
            run = the_run(tmp_path, set())
            waiting = status_until(tmp_path, run, "waiting for you: B1")
            assert "waiting for you: B1 — task T1 reached its soft cap task_usd" in waiting, waiting
            assert f"`hilbert approve B1 --run {run} [--by N]`" in waiting, waiting
            assert " T1     paused " in waiting and "budgets: task_usd T1 $" in waiting, waiting
            assert live.poll() is None  # the run waits, live
            approved = hilbert("approve", "B1", "--run", run, "--by", "100", cwd=tmp_path)
            assert approved.returncode == 0, approved.stderr
            assert "raised task_usd of task T1 by $100.00" in approved.stdout, approved.stdout
            assert "the waiting work goes on within a second" in approved.stdout
            # it goes on until its 6th model call reaches the turns cap, asks B2, and is killed there
            killed, _ = live.communicate(timeout=FINISH_S)
            assert live.returncode == -9 and "B2" not in killed.split("budget_asked", 1)[0], killed[-3000:]
        finally:
            stop(live)
        down = hilbert("status", "--run", run, cwd=tmp_path).stdout
        assert "waiting for you: B2 — task T1 reached its soft cap task_turns (6 turns of 6 turns)" in down, (
            down
        )
        assert f"once you resume it (`hilbert run --resume {run}`)" in down, down
        # resumed, it still waits (a fold of the log, not a memory): no new question; the answer resumes it
        resumed = start(tmp_path, ["run", "--resume", run], env(tmp_path))
        try:
            again = status_until(tmp_path, run, " T1     paused ")
            assert "waiting for you: B2" in again and "B3" not in again and "interrupted" not in again, again
            approved = hilbert("approve", "B2", "--run", run, cwd=tmp_path)  # by the cap as set: 6 turns
            assert "raised task_turns of task T1 by 6 turns to 12 turns" in approved.stdout, approved.stdout
            out, _ = resumed.communicate(timeout=FINISH_S)
        finally:
            stop(resumed)
        assert resumed.returncode == 0, out[-3000:]
        assert "1 of 1 tasks merged onto hilbert/integration" in out, out[-3000:]
        assert "  spent: $0.0" in out and "task_usd T1 $" in out, out[-2000:]
        pr = (tmp_path / "home" / "runs" / run / "PR.md").read_text()
        assert "Spend and budgets:" in pr and "- budgets: task_usd T1 $" in pr, pr

        # a hard cap on turns: the task halts after its worker's edit (its 7th model call: the whole suite
        # is run once before the first edit), the edit kept
        (tmp_path / "hilbert.toml").write_text(SETTINGS + PRICE)
        before = {p.name for p in (tmp_path / "home" / "runs").iterdir()}
        hard = hilbert(*run_args, "--budget", "task_turns=7", "--budget", "hard=task_turns", cwd=tmp_path)
        assert hard.returncode == 1, hard.stdout[-3000:] + hard.stderr
        halted = the_run(tmp_path, before)
        assert "  T1: needs you" in hard.stdout, hard.stdout[-3000:]
        assert "B1 — task T1 reached its hard cap task_turns (7 turns of 7 turns): its work halted, kept" in (
            hard.stdout
        ), hard.stdout[-3000:]
        assert f"`hilbert retry {halted} T1` goes on" in hard.stdout
        assert "poincare: archived 1 uncommitted change(s) to " in hard.stdout, hard.stdout[-3000:]
        assert len(list((tmp_path / "home" / "runs" / halted).rglob("poincare-*.tar.gz"))) == 1  # the edit
