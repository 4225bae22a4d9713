"""Escalations that end (`hilbert.fleet.person`): a task no lead will answer *needs you*, with its
evidence and the command that reopens it; `hilbert retry RUN TASK --edit` reopens it as the person
changed it and the run goes on to merge it. Through the real CLI against the fake engineer.

The task's verify names a test file that is not there (a planning mistake a person makes): no worker
can pass it, and the lead is the workers' own model (no --lead-model), which already failed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fleet_support import commit_all

from cli_support import run_cli
from hilbert.commands import command_env
from hilbert.sim.sample import generate_sample_project
from hilbert.testing.fake_server import FakeServer


def hilbert(*args: str, cwd: Path, editor: str = "false") -> subprocess.CompletedProcess[str]:
    env = {**command_env(hilbert_python_first=True), "HILBERT_HOME": str(cwd / "home"), "EDITOR": editor}
    return run_cli(*args, cwd=cwd, env=env, timeout=300)


def test_a_task_nobody_can_finish_needs_you_and_retry_with_an_edit_merges_it(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "repo", 3, bugs=1)
    commit_all(project.path)
    bug = project.bugs[0]
    test_file = bug.tests[0].split("::")[0]
    wrong = test_file.replace("test_", "test_no_such_", 1)
    (tmp_path / "PLAN.md").write_text(
        f"# make the tests pass\n\n## T1 — Fix {bug.function}\n\n"
        f"```yaml hilbert-task\nverify: python -m pytest -q {wrong}\nclaims: [{bug.file}]\n```\n"
    )
    (tmp_path / "hilbert.toml").write_text("[fleet]\nmax_attempts = 1\n\n[gate]\nrounds = 1\n")
    with FakeServer("engineer") as engineer:
        model = f"openai:fake@{engineer.openai_base_url}"
        ran = hilbert(
            "run", "--plan", "PLAN.md", "--repo", "repo", "--workers", "1", "--model", model, cwd=tmp_path
        )
        assert ran.returncode == 1, ran.stderr + ran.stdout[-3000:]
        run = next((tmp_path / "home" / "runs").iterdir()).name
        out = ran.stdout
        assert "  T1: needs you" in out and "what needs you:" in out, out[-3000:]
        assert "T1 needs you: the lead runs on the workers' model, which already failed at it" in out
        assert "its last attempt: " in out and wrong in out.split("its last attempt: ", 1)[1].splitlines()[0]
        assert f"hilbert retry {run} T1  (--edit to change the task first)" in out
        assert "no task merged: nothing was written to your repository" in out
        status = hilbert("status", "--run", run, cwd=tmp_path)
        assert "1 needs you" in status.stdout and f"hilbert retry {run} T1" in status.stdout, status.stdout
        # a task that does not need the person is refused in one line
        done_task = hilbert("retry", run, "T9", cwd=tmp_path)
        assert done_task.returncode == 2 and "has no task 'T9'" in done_task.stderr, done_task.stderr
        # the person fixes the verify command in their editor; a model that is not there refuses the
        # resume in one line, and the retry asked again (with the run's model) goes on and merges it
        fix = f"sed -i 's#{wrong}#{test_file}#'"
        gone = hilbert(
            "retry",
            run,
            "T1",
            "--edit",
            "--model",
            "openai:x@http://127.0.0.1:9/v1",
            cwd=tmp_path,
            editor=fix,
        )
        assert gone.returncode == 2 and "does not answer" in gone.stderr, gone.stderr + gone.stdout[-2000:]
        retried = hilbert("retry", run, "T1", cwd=tmp_path)
        assert retried.returncode == 0, retried.stderr + retried.stdout[-3000:]
    assert f"T1 reopened as you edited it; run {run} goes on:" in gone.stdout
    assert f"T1 is reopened already; run {run} goes on:" in retried.stdout
    # the resumed run prints what it does now, not the first run's events again
    assert f"(its earlier events: hilbert log --run {run})" in retried.stdout
    assert "fleet started" not in retried.stdout and "T1 → needs you" in ran.stdout
    assert "1 of 1 tasks merged onto hilbert/integration" in retried.stdout, retried.stdout[-3000:]
    assert f"the result is the branch hilbert/{run} in your repository" in retried.stdout
    again = hilbert("retry", run, "T1", cwd=tmp_path)
    assert again.returncode == 2 and "T1 is done: only a task that needs you" in again.stderr, again.stderr
