"""Escalations that end (`hilbert.fleet.person`): a task no lead will answer *needs you*, with its
evidence and the command that reopens it; `hilbert retry RUN TASK --edit` reopens it as the person
changed it and the run goes on to merge it. Through the real CLI against the fake engineer.

The task's verify names a test file that is not there (a planning mistake a person makes): no worker
can pass it, and the lead is the workers' own model (no --lead-model), which already failed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from fleet_support import ENV, commit_all, readme_repo
from test_authority import GO_ON, Workers, first, worker_of

from cli_support import run_cli
from hilbert.commands import Runner, command_env
from hilbert.fleet.inbox import PERSON, send
from hilbert.fleet.outcomes import FleetResult
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.security.envelope import MessageKey
from hilbert.settings import Settings
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responder import Conversation, Reply


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
        assert "escalations go to you, not the lead: it runs on the workers' model" in out
        assert "its last attempt: " in out and wrong in out.split("its last attempt: ", 1)[1].splitlines()[0]
        assert f"hilbert retry {run} T1  (--edit to change the task first)" in out
        assert "no task merged: nothing was written to your repository" in out
        listed = hilbert("runs", cwd=tmp_path)
        row = listed.stdout.splitlines()[1].split()  # RUN STATE AGE DONE NEEDS-YOU REPOSITORY
        assert row[:2] == [run, "finished"] and row[3:5] == ["0/1", "T1"], listed.stdout
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


class OnceIdle(Workers):
    """T1's first worker claims done without doing anything (its check cannot pass); a later one
    writes T1.txt. T2's worker waits for the person's "go on" (so the run is live throughout)."""

    def __init__(self) -> None:
        super().__init__(ask=False)
        self.t1_workers: set[str] = set()

    def reply(self, conversation: Conversation) -> Reply:
        brief = next(m.content for m in conversation.messages if m.role == "user")
        if "Task T1:" in brief:
            self.t1_workers.add(conversation.messages[0].content)  # each attempt: a worker of its own
            if len(self.t1_workers) > 1:
                turn = sum(1 for m in conversation.messages if m.role == "assistant")
                tool, arguments = (
                    ("write_file", {"path": "T1.txt", "content": "1\n"})
                    if turn == 0
                    else ("finish", {"claim": "done", "evidence": "T1.txt"})
                )
                return Reply(tool_calls=(ToolCall(f"c1_{turn}", tool, arguments),))
        return super().reply(conversation)


def test_a_live_run_takes_a_retried_task_within_seconds(tmp_path: Path) -> None:
    plan = Plan(
        goal="g",
        tasks=(
            Task(id="T1", title="write T1.txt", verify="test -f T1.txt"),
            Task(id="T2", title="wait for the person", verify="test -f two.txt"),
        ),
    )

    async def scenario(store: EventStore, workers: FakeServer) -> FleetResult:
        running = asyncio.create_task(
            run_fleet(
                plan, repo=readme_repo(tmp_path / "repo"), root=tmp_path / "run", run="r",
                model=make_model(f"openai:w@{workers.openai_base_url}", env={}), store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of({"fleet.workers": 2, "fleet.max_attempts": 1, "gate.rounds": 1,
                                      "budgets.max_turns": 600, "commands.test": "true"}),
            )
        )  # fmt: skip
        await first(store, "task_needs_you", running, lambda d: d["task"] == "T1")
        code, out, err = await cli_in_run(tmp_path, "retry", "r", "T1")
        assert code == 0 and "T1 reopened (run r); the running fleet starts it" in out, out + err
        await first(store, "merged", running, lambda d: d["task"] == "T1")
        send(
            store, "r", worker_of(store, "T2"), GO_ON, sender=PERSON, key=MessageKey.for_run(tmp_path / "run")
        )
        return await running

    async def main() -> FleetResult:
        with FakeServer(OnceIdle()) as workers, EventStore.open(tmp_path / "log.db") as store:
            return await scenario(store, workers)

    result = asyncio.run(main())
    assert result.all_done and result.states["T1"].reopened == 1, result.states


async def cli_in_run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`hilbert ARGS --db LOG` in its own process, without blocking the running fleet."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hilbert.ui.cli", *args, "--db", str(tmp_path / "log.db"),
        env={**ENV, "HILBERT_HOME": str(tmp_path / "home")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()
