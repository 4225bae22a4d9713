"""A small fleet end to end: named workers fix a multi-bug project in isolated workspaces; the
harness verifies each claim, the merge queue lands the work, the integration branch ends green."""

from __future__ import annotations

import asyncio
import random
import subprocess
from pathlib import Path
from typing import Any

from fleet_support import ENV, git_repo, readme_repo

from hilbert.commands import Runner
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.models import make_model
from hilbert.settings import Settings
from hilbert.sim.sample import SampleProject, generate_sample_project
from hilbert.store import EventStore
from hilbert.testing import FunctionModel
from hilbert.testing.fake_server import FakeServer
from hilbert.workspaces.integration import INTEGRATION


def plan_for(project: SampleProject) -> Plan:
    """One task per buggy module (what the lead will write; here the test knows the bugs)."""
    tasks = []
    for n, bug in enumerate(sorted({b.file for b in project.bugs}), 1):
        test_file = f"tests/test_{Path(bug).stem}.py"
        assert (project.path / test_file).exists()
        tasks.append(
            Task(
                id=f"T{n}",
                title=f"fix {bug}",
                claims=(bug,),
                verify=f"python -m pytest -q -p no:cacheprovider {test_file}",
            )
        )
    return Plan(goal="make the test suite pass", tasks=tuple(tasks))


def test_three_workers_fix_three_modules_and_the_integration_branch_is_green(tmp_path: Path) -> None:
    seed = random.randrange(1_000_000)
    project = generate_sample_project(tmp_path / "repo", seed, bugs=3)
    git_repo(project)
    plan = plan_for(project)
    with FakeServer("engineer", seed=seed) as server, EventStore.open(tmp_path / "log.db") as store:
        model = make_model(f"anthropic:fake@{server.base_url}", env={})
        result = asyncio.run(
            run_fleet(
                plan,
                repo=project.path,
                root=tmp_path / "run",
                run="r1",
                model=model,
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of({"fleet.workers": 3}),
            )
        )
        assert result.all_done, (seed, result.states, result.stuck)
        workers = {e.agent for e in store.events(run="r1") if e.kind == "agent_started"}
        assert len(workers) == len(plan.tasks) and "harness" not in workers
        merged = [e.data["task"] for e in store.events(run="r1", agent="harness", kinds=["merged"])]
        assert sorted(merged) == sorted(t.id for t in plan.tasks)
    # the integration branch, checked out fresh, passes the whole suite; the person's repo is untouched
    check = tmp_path / "check"
    subprocess.run(
        ["git", "clone", "-q", "-b", INTEGRATION, str(result.integration_repo), str(check)], check=True
    )
    assert (
        subprocess.run(
            ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=check,
            env=ENV,
            capture_output=True,
        ).returncode
        == 0
    ), seed
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=project.path, capture_output=True, text=True
    )
    assert (
        status.stdout == ""
        and subprocess.run(
            ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=project.path,
            env=ENV,
            capture_output=True,
        ).returncode
        != 0
    )


def test_every_fleet_kind_has_a_line_of_its_own_even_with_keys_missing(tmp_path: Path) -> None:
    import hilbert.climb.events  # noqa: F401  (the climb's kinds live in the same registry, whatever ran before)
    from hilbert.fleet.events import EVENTS as FLEET_KINDS
    from hilbert.ui.log_view import format_event

    assert "try_kept" in FLEET_KINDS
    with EventStore.open(tmp_path / "log.db") as store:
        for kind in FLEET_KINDS:
            store.append("r", "harness", kind, {})
        lines = [format_event(e, store) for e in store.events(run="r")]
    assert len(lines) == len(FLEET_KINDS)
    assert not [line for line in lines if "{" in line], lines  # no JSON fallback, no KeyError


def test_the_fleets_events_read_as_one_line_each(tmp_path: Path) -> None:
    from hilbert.ui.log_view import format_event

    with EventStore.open(tmp_path / "log.db") as store:
        output = (
            "\n".join(f"line {n}" for n in range(10)) + "\nFAILED tests/test_a.py::test_x - assert 1 == 2"
        )
        store.append(
            "r",
            "harness",
            "gate_step",
            {
                "task": "T1",
                "worker": "gauss",
                "round": 2,
                "step": "verify",
                "passed": False,
                "summary": "`pytest -q` → exit 1",
                "output": output,
            },
        )
        store.append("r", "harness", "merged", {"task": "T1", "commit": "0123456789abcdef"})
        store.append("r", "harness", "fleet_finished", {"states": {"T1": "done", "T2": "escalated"}})
        failed, merged, finished = (format_event(e, store) for e in store.events(run="r"))
    assert "gate T1 by gauss, round 2: verify FAILED — `pytest -q` → exit 1" in failed
    assert failed.splitlines()[-1].strip() == "FAILED tests/test_a.py::test_x - assert 1 == 2"
    assert "(8 earlier lines)" in failed
    assert merged.endswith("merged T1 at 0123456789")
    assert finished.endswith("fleet finished: T1 done, T2 escalated")


def test_a_harness_step_that_fails_mid_run_is_recorded_the_work_archived_and_the_task_retried(
    tmp_path: Path,
) -> None:
    """The first worker's repository disappears under it (a disk failure, another process: the worker's
    own shell may not touch it, by policy and sandbox), so the harness cannot commit its work. The run
    records the error, archives what the worker wrote, retries the task with a new worker, ends green."""
    import shutil

    from hilbert.testing.fake_server import ScriptedResponder

    repo = readme_repo(tmp_path / "repo")
    script = ScriptedResponder.from_turns(
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}]},
            {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "done.txt"}}]},
        ]
    )

    def damaging(model: Any) -> FunctionModel:
        """The model, but its first call first removes the first worker's repository (from outside)."""

        async def answer(messages: Any, tools: Any) -> Any:
            if wrapped.calls == 1:
                shutil.rmtree(tmp_path / "run" / "git" / "poincare.git")
            return await model.complete(messages, tools)

        wrapped = FunctionModel(answer, name=model.name)
        return wrapped

    plan = Plan(goal="g", tasks=(Task(id="T1", title="write done.txt", verify="test -f done.txt"),))
    with FakeServer(script) as server, EventStore.open(tmp_path / "log.db") as store:
        result = asyncio.run(
            run_fleet(
                plan,
                repo=repo,
                root=tmp_path / "run",
                run="r",
                model=damaging(make_model(f"openai:fake@{server.openai_base_url}", env={})),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of(
                    {"fleet.workers": 1, "fleet.max_attempts": 2, "commands.test": "test -f README.md"}
                ),
            )
        )
        harness = store.events(run="r", agent="harness")
    assert result.all_done
    errors = [e.data for e in harness if e.kind == "task_error"]
    assert len(errors) == 1 and errors[0]["task"] == "T1" and "RunError" in errors[0]["error"]
    retried = [e.data for e in harness if e.kind == "task_retried"]
    assert len(retried) == 1 and "the harness failed" in retried[0]["why"]
    closed = [e.data["message"] for e in harness if e.kind == "workspace_closed"]
    assert closed[0].startswith("poincare: archived") and "done.txt" not in closed[0]
    archived = list((tmp_path / "run" / "archive").glob("poincare-*.tar.gz"))
    assert len(archived) == 1
    import tarfile

    with tarfile.open(archived[0]) as tar:
        assert "poincare/done.txt" in tar.getnames()
    assert [e.data["task"] for e in harness if e.kind == "merged"] == ["T1"]


def test_a_task_budget_in_the_plan_bounds_each_attempt(tmp_path: Path) -> None:
    """T1's plan gives an attempt one model call; the worker needs two, so T1 never lands. T2, on the
    run's default budget, does the same work and merges."""
    from hilbert.fleet.plan import Budget
    from hilbert.testing.fake_server import ScriptedResponder

    repo = readme_repo(tmp_path / "repo")
    two_turns = ScriptedResponder.from_turns(
        [
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "done.txt", "content": "done\n"}}]},
            {"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "done.txt"}}]},
        ]
    )
    tasks = (
        Task(id="T1", title="tight", verify="test -f done.txt", budget=Budget(turns=1)),
        Task(id="T2", title="roomy", verify="test -f done.txt"),
    )
    with FakeServer(two_turns) as server, EventStore.open(tmp_path / "log.db") as store:
        result = asyncio.run(
            run_fleet(
                Plan(goal="g", tasks=tasks),
                repo=repo,
                root=tmp_path / "run",
                run="r",
                model=make_model(f"openai:fake@{server.openai_base_url}", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of({"fleet.workers": 2, "fleet.max_attempts": 1, "commands.test": "true"}),
            )
        )
        attempted = {e.data["task"]: e.data for e in store.events(run="r", kinds=["task_attempted"])}
    assert result.states["T1"].status == "needs_you" and result.states["T2"].status == "done"
    assert attempted["T1"]["status"] == "halted" and "1 model calls" in attempted["T1"]["reason"]
