"""The lead's planning tools and the fake server's simulated lead: over the real wire, on a generated
sample project, the lead runs the real tests, writes PLAN.md, and every task's verify fails now."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hilbert.agent.loop import AgentResult, run_agent
from hilbert.agent.policies import TurnLimit
from hilbert.agent.tools import command_env
from hilbert.errors import UserError
from hilbert.fleet.lead_tools import PlanningToolBox
from hilbert.fleet.plan import parse_plan
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.lead import LeadPolicy
from hilbert.testing.sample import SampleProject, generate_sample_project

GOAL = "Make the test suite of this project pass"


def plan_with_lead(
    tmp_path: Path, project: SampleProject, policy: LeadPolicy, task: str = GOAL
) -> tuple[AgentResult, Path, EventStore]:
    plan_path = tmp_path / "run" / "PLAN.md"
    store = EventStore.open(tmp_path / "log.db")
    toolbox = PlanningToolBox(project.path, plan_path, env=command_env(hilbert_python_first=True))
    with FakeServer(policy) as server:
        model = make_model(f"anthropic:fake@{server.base_url}", env={})
        result = asyncio.run(
            run_agent(
                run="r",
                agent="lead",
                task=task,
                model=model,
                toolbox=toolbox,
                store=store,
                policies=[TurnLimit(30)],
            )
        )
    return result, plan_path, store


def verify_exit_code(project: SampleProject, command: str) -> int:
    env = command_env(hilbert_python_first=True)
    return subprocess.run(command, shell=True, cwd=project.path, env=env, capture_output=True).returncode


@pytest.mark.parametrize(("seed", "modules"), [(2, 3), (0, 2)])
def test_the_lead_plans_one_task_per_broken_module(tmp_path: Path, seed: int, modules: int) -> None:
    project = generate_sample_project(tmp_path / "proj", seed, bugs=3)
    broken = sorted({bug.file for bug in project.bugs})
    assert len(broken) == modules  # seed 0 puts two of its three bugs in one module
    result, plan_path, store = plan_with_lead(tmp_path, project, LeadPolicy())
    assert result.status == "finished", result.reason
    plan = parse_plan(plan_path.read_text())
    assert plan.goal == GOAL
    assert sorted(claim for task in plan.tasks for claim in task.claims) == broken
    assert all(len(task.claims) == 1 and not task.depends_on for task in plan.tasks)
    for task in plan.tasks:
        module = task.claims[0].rsplit("/", 1)[-1]
        assert task.verify == f"python -m pytest -q tests/test_{module}"
        assert verify_exit_code(project, task.verify) == 1, task.verify
        failing = [bug.function for bug in project.bugs if bug.file == task.claims[0]]
        assert all(f"test_{function}_" in task.description for function in failing)
    assert not (project.path / "PLAN.md").exists()
    tools = [e.data["name"] for e in store.events(run="r") if e.kind == "tool_result"]
    assert tools[0] == "shell" and tools[-2:] == ["write_plan", "finish"]
    assert "write_file" not in tools and "edit_file" not in tools


def test_the_final_task_depends_on_all_the_others(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "proj", 2, bugs=3)
    result, plan_path, _ = plan_with_lead(tmp_path, project, LeadPolicy.from_options({"final": "true"}, 0))
    assert result.status == "finished", result.reason
    plan = parse_plan(plan_path.read_text())
    *fixes, last = plan.tasks
    assert (last.verify, last.depends_on, last.claims) == (
        "python -m pytest -q",
        tuple(t.id for t in fixes),
        (),
    )
    assert plan.order()[-1] == last.id


def test_the_lead_fixes_a_plan_that_write_plan_refused(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "proj", 2, bugs=3)
    result, plan_path, store = plan_with_lead(
        tmp_path,
        project,
        LeadPolicy(final_task=True),
        task="Make the tests pass\n## Context\nThe suite is small.",
    )
    assert result.status == "finished", result.reason
    answers = [e for e in store.events(run="r") if e.kind == "tool_result" and e.data["name"] == "write_plan"]
    assert [e.data["is_error"] for e in answers] == [True, False]
    refusal = store.get_messages([answers[0].data["message"]])[0].content
    assert "goal" in refusal and "nothing was written" in refusal
    plan = parse_plan(plan_path.read_text())
    assert plan.goal == "Make the tests pass" and len(plan.tasks) == 4


def test_the_lead_says_so_when_the_planning_tools_are_missing() -> None:
    from hilbert.testing.engineer.harness import HILBERT_TOOLS
    from hilbert.testing.fake_server import Conversation

    conversation = Conversation("openai-chat", "fake", "", (), HILBERT_TOOLS)
    reply = LeadPolicy().reply(conversation)
    assert not reply.tool_calls and "write_plan" in reply.text


def write_plan(toolbox: PlanningToolBox, **arguments: Any) -> tuple[str, bool]:
    outcome = asyncio.run(toolbox.run(ToolCall("c1", "write_plan", arguments)))
    return outcome.content, outcome.is_error


def task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "title": f"task {task_id}", "description": "", "verify": "true", **fields}


def test_write_plan_refuses_a_bad_plan_and_says_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    plan_path = tmp_path / "PLAN.md"
    toolbox = PlanningToolBox(tmp_path / "ws", plan_path)
    no_verify = task("T1")
    del no_verify["verify"]
    text, is_error = write_plan(toolbox, goal="g", tasks=[no_verify])
    assert is_error and "tasks[0] (T1).verify: Field required" in text
    text, is_error = write_plan(
        toolbox, goal="g", tasks=[task("T1", depends_on=["T2"]), task("T2", depends_on=["T1"])]
    )
    assert is_error and "dependency cycle: T1 → T2 → T1" in text
    text, is_error = write_plan(toolbox, goal="g", tasks=[task("T1", depends_on=["T9"])])
    assert is_error and "'T9', which is not in the plan" in text
    assert not plan_path.exists() and toolbox.plan is None
    text, is_error = write_plan(
        toolbox, goal="g", tasks=[task("T1", claims=["a.py"]), task("T2", depends_on=["T1"])]
    )
    assert (text, is_error) == ("wrote PLAN.md with 2 tasks (T1, T2)", False)
    assert parse_plan(plan_path.read_text()) == toolbox.plan
    assert toolbox.plan is not None and toolbox.plan.tasks[0].claims == ("a.py",)


def test_planning_tools_are_read_only_and_the_plan_lives_outside(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(UserError, match="inside the workspace"):
        PlanningToolBox(workspace, workspace / "PLAN.md")
    with pytest.raises(UserError, match="inside the workspace"):
        PlanningToolBox(workspace, tmp_path / "ws" / "sub" / ".." / "PLAN.md")
    toolbox = PlanningToolBox(workspace, tmp_path / "PLAN.md")
    names = [spec.name for spec in toolbox.specs()]
    assert names == ["read_file", "list_files", "grep", "shell", "write_plan", "finish"]
    outcome = asyncio.run(toolbox.run(ToolCall("c1", "write_file", {"path": "x", "content": "y"})))
    assert outcome.is_error and "write_plan" in outcome.content
    assert not (workspace / "x").exists()


def test_the_lead_maps_imports_to_the_project_files_they_name() -> None:
    from hilbert.testing.lead.procedure import imported_modules

    files = {"src/pkg/__init__.py", "src/pkg/dates.py", "pkg2/__init__.py", "tests/test_x.py"}
    source = "import os\nimport pytest\nfrom pkg import dates, helper\nfrom pkg2 import thing\n"
    assert imported_modules(source, files) == ("src/pkg/dates.py", "pkg2/__init__.py")
    assert imported_modules("from os.path import join\n", files) == ()
    assert imported_modules("from pkg import (\n    helper,\n    dates,\n)\n", files) == ("src/pkg/dates.py",)
