"""The lead's planning tools and the fake server's simulated lead: over the real wire, on a generated
sample project, the lead runs the real tests, writes PLAN.md, and every task's verify fails now."""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hilbert.agent.loop import AgentResult, run_agent
from hilbert.agent.policies import TurnLimit
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.errors import UserError
from hilbert.fleet.lead_tools import PlanningToolBox
from hilbert.fleet.plan import Task, parse_plan
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.sim.lead import LeadResponder
from hilbert.sim.sample import SampleProject, generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer

GOAL = "Make the test suite of this project pass"


def plan_with_lead(
    tmp_path: Path, project: SampleProject, policy: LeadResponder, task: str = GOAL, turns: int = 30
) -> tuple[AgentResult, Path, EventStore]:
    plan_path = tmp_path / "run" / "PLAN.md"
    store = EventStore.open(tmp_path / "log.db")
    toolbox = PlanningToolBox(
        project.path, plan_path, runner=Runner.unsandboxed(command_env(hilbert_python_first=True))
    )
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
                policies=[TurnLimit(turns)],
            )
        )
    return result, plan_path, store


def verify_exit_code(project: SampleProject, command: str) -> int:
    env = command_env(hilbert_python_first=True)
    return subprocess.run(command, shell=True, cwd=project.path, env=env, capture_output=True).returncode


def tools_used(store: EventStore) -> list[tuple[str, dict[str, Any]]]:
    return [(e.data["name"], e.data["arguments"]) for e in store.events(run="r") if e.kind == "tool_result"]


def calls_of(project: SampleProject, source_file: str, function: str) -> list[str]:
    """The ids of the tests (in the module's test file) whose assertion calls `function`."""
    test_file = f"tests/test_{Path(source_file).stem}.py"
    text = (project.path / test_file).read_text()
    found = re.findall(rf"^def (test_\w+)\(\):\n    assert {function}\(", text, re.MULTILINE)
    return [f"{test_file}::{name}" for name in found]


def check_one_task_per_function(project: SampleProject, tasks: tuple[Task, ...]) -> None:
    """Each task fixes one broken function: it claims that function's module, names it and its
    failing tests (those its bugs break), and its verify runs all of the function's tests, failing
    and passing; tasks on one module share it, and say so."""
    failing: dict[tuple[str, str], list[str]] = {}
    halves = {bug for pair in project.pairs for bug in pair}
    for bug in project.bugs:
        for test in bug.tests:  # a paired half is read (and tested) through a function of its own
            name = test.split("::")[1]
            function = name.removeprefix("test_").removesuffix("_value") if bug in halves else bug.function
            failing.setdefault((bug.file, function), []).append(test)
    per_file = Counter(file for file, _ in failing)
    assert sorted((task.claims[0], task.title.split("`")[1]) for task in tasks) == sorted(failing)
    for task in tasks:
        (claim,) = task.claims
        function = task.title.split("`")[1]
        tests = failing[claim, function]
        count = len(tests)
        assert task.title == f"Fix `{function}` in {claim} ({count} failing test{'s' * (count > 1)})"
        assert all(f"- `{test}`" in task.description for test in tests)
        words = shlex.split(task.verify)
        assert words[:4] == ["python", "-m", "pytest", "-q"], task.verify
        every = calls_of(project, claim, function)
        assert sorted(words[4:]) == sorted(every) and set(tests) <= set(every), task.verify
        assert (len(every) > count) == ("passing test" in task.description)
        assert task.allow_shared_claims == (per_file[claim] > 1), task
        assert ("allow_shared_claims" in task.description) == task.allow_shared_claims
        assert not task.depends_on
    assert [task.id for task in tasks] == [f"T{n}" for n in range(1, len(tasks) + 1)]


@pytest.mark.parametrize(("seed", "modules"), [(2, 3), (0, 2)])
def test_the_lead_plans_one_task_per_broken_function(tmp_path: Path, seed: int, modules: int) -> None:
    project = generate_sample_project(tmp_path / "proj", seed, bugs=3)
    broken = sorted({bug.file for bug in project.bugs})
    assert len(broken) == modules  # seed 0 puts two of its three bugs in one module
    result, plan_path, store = plan_with_lead(tmp_path, project, LeadResponder())
    assert result.status == "finished", result.reason
    plan = parse_plan(plan_path.read_text())
    assert plan.goal == GOAL and len(plan.tasks) == 3
    check_one_task_per_function(project, plan.tasks)
    for task in plan.tasks:
        assert verify_exit_code(project, task.verify) == 1, task.verify
    assert not (project.path / "PLAN.md").exists()
    tools = [name for name, _ in tools_used(store)]
    assert tools[0] == "shell" and tools[-2:] == ["write_plan", "finish"]
    assert "write_file" not in tools and "edit_file" not in tools


def test_the_lead_plans_a_task_per_function_across_twelve_modules_and_pairs(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "proj", 3, bugs=24, modules=12, paired=2)
    result, plan_path, store = plan_with_lead(tmp_path, project, LeadResponder(final_task=True))
    assert result.status == "finished", result.reason
    *fixes, last = parse_plan(plan_path.read_text()).tasks
    assert len(fixes) == 24 + 2 * 2  # one per broken function; each half of a pair has its own
    check_one_task_per_function(project, tuple(fixes))
    bounds = [task for task in fixes if task.claims == (project.pairs[0][0].file,)]
    assert len(bounds) == 4 and all(task.allow_shared_claims for task in bounds)
    assert last.title == "Whole suite green" and last.depends_on == tuple(t.id for t in fixes)
    reads = [args["path"] for name, args in tools_used(store) if name == "read_file"]
    assert sorted(reads) == sorted({f"tests/test_{Path(b.file).stem}.py" for b in project.bugs})
    for task in (fixes[0], fixes[-1]):
        assert verify_exit_code(project, task.verify) == 1, task.verify


def test_the_lead_finds_the_failing_tests_of_a_survey_too_long_for_one_answer(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "proj", 5, bugs=128, modules=48)
    result, plan_path, store = plan_with_lead(tmp_path, project, LeadResponder(), turns=80)
    assert result.status == "finished", result.reason
    tasks = parse_plan(plan_path.read_text()).tasks
    assert len(tasks) == 128
    check_one_task_per_function(project, tasks)
    used = tools_used(store)
    # pytest prints the summary's whole messages when it sees CI set (else cut to the terminal), so the
    # survey is 300 or 1,400 lines; the lead greps the saved copy for the failing tests' lines
    greps = [args for name, args in used if name == "grep" and args["path"].startswith(".hilbert/")]
    pages = [args for name, args in used if name == "read_file" and args["path"].startswith(".hilbert/")]
    assert len(greps) == 1 and not pages, (greps, pages)


def test_the_final_task_depends_on_all_the_others(tmp_path: Path) -> None:
    project = generate_sample_project(tmp_path / "proj", 2, bugs=3)
    result, plan_path, _ = plan_with_lead(tmp_path, project, LeadResponder.from_options({"final": "true"}, 0))
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
        LeadResponder(final_task=True),
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
    from hilbert.sim.engineer.harness import HILBERT_TOOLS
    from hilbert.testing.fake_server import Conversation

    conversation = Conversation("openai-chat", "fake", "", (), HILBERT_TOOLS)
    reply = LeadResponder().reply(conversation)
    assert not reply.tool_calls and "write_plan" in reply.text


def write_plan(toolbox: PlanningToolBox, **arguments: Any) -> tuple[str, bool]:
    outcome = asyncio.run(toolbox.run(ToolCall("c1", "write_plan", arguments)))
    return outcome.content, outcome.is_error


def task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "title": f"task {task_id}", "description": "", "verify": "true", **fields}


def test_write_plan_refuses_a_bad_plan_and_says_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    plan_path = tmp_path / "PLAN.md"
    toolbox = PlanningToolBox(tmp_path / "ws", plan_path, runner=Runner.unsandboxed())
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
        PlanningToolBox(workspace, workspace / "PLAN.md", runner=Runner.unsandboxed())
    with pytest.raises(UserError, match="inside the workspace"):
        PlanningToolBox(workspace, tmp_path / "ws" / "sub" / ".." / "PLAN.md", runner=Runner.unsandboxed())
    toolbox = PlanningToolBox(workspace, tmp_path / "PLAN.md", runner=Runner.unsandboxed())
    names = [spec.name for spec in toolbox.specs()]
    assert names == ["read_file", "list_files", "grep", "shell", "write_plan", "finish"]
    outcome = asyncio.run(toolbox.run(ToolCall("c1", "write_file", {"path": "x", "content": "y"})))
    assert outcome.is_error and "write_plan" in outcome.content
    assert not (workspace / "x").exists()


def test_the_lead_maps_imports_to_the_project_files_they_name() -> None:
    from hilbert.sim.lead.procedure import imported_modules

    files = {"src/pkg/__init__.py", "src/pkg/dates.py", "pkg2/__init__.py", "tests/test_x.py"}
    source = "import os\nimport pytest\nfrom pkg import dates, helper\nfrom pkg2 import thing\n"
    assert imported_modules(source, files) == ("src/pkg/dates.py", "pkg2/__init__.py")
    assert imported_modules("from os.path import join\n", files) == ()
    assert imported_modules("from pkg import (\n    helper,\n    dates,\n)\n", files) == ("src/pkg/dates.py",)


def test_the_lead_groups_by_what_a_test_calls_then_by_its_name_then_by_its_file() -> None:
    from hilbert.sim.lead.procedure import Group, group_tests

    files = {"pkg/a.py", "pkg/b.py", "pkg/__init__.py"}
    source = (
        "from pkg.a import clamp, clamp_all\nfrom pkg.b import mean\n\n\n"
        "def test_odd_name():\n    assert clamp(5, 0, 3) == 3\n\n\n"
        "def test_mean_one():\n    assert mean([7]) == 7\n\n\n"
        "def test_clamp_edge():\n    assert clamp(3, 0, 3) == 3\n"
    )  # test_clamp_all_empty's body is missing (a cut read): its name says what it calls
    groups: dict[tuple[str, ...], Group] = {}
    ids = ["tests/t.py::test_odd_name", "tests/t.py::test_clamp_all_empty", "tests/t.py::test_mean_one"]
    group_tests(groups, "tests/t.py", ids, source, files)
    group_tests(groups, "tests/u.py", ["tests/u.py::test_x"], "def test_x():\n    assert 1 == 2\n", files)
    assert [(g.claims, g.function, g.tests) for g in groups.values()] == [
        (("pkg/a.py",), "clamp", [ids[0]]),
        (("pkg/a.py",), "clamp_all", [ids[1]]),
        (("pkg/b.py",), "mean", [ids[2]]),
        ((), None, ["tests/u.py::test_x"]),
    ]
    # a passing test of a broken function is checked too, so that a fix cannot break it
    assert next(iter(groups.values())).checks == [ids[0], "tests/t.py::test_clamp_edge"]
    assert [g.checks for g in groups.values()][1:] == [[ids[1]], [ids[2]], ["tests/u.py::test_x"]]


def test_names_imported_from_outside_the_project_are_not_what_a_test_tests() -> None:
    from hilbert.sim.lead.procedure import Group, group_tests

    files = {"pkg/__init__.py", "pkg/core.py"}
    source = (
        "from decimal import Decimal\nfrom random import choices\n\nimport pkg as p\n\n\n"
        "def test_span_decimal():\n    args = (Decimal('1.0'), Decimal('2.0'))\n"
        "    assert p.span(*args) == 1\n\n\n"
        "def test_low_random():\n    data = choices(range(9), k=5)\n    assert p.low(data) == min(data)\n\n\n"
        "def test_decimal_only():\n    assert Decimal('1') == 1\n"
    )  # each test builds its input with the standard library, then calls the project through `p`
    ids = [f"tests/t.py::{name}" for name in ("test_span_decimal", "test_low_random", "test_decimal_only")]
    groups: dict[tuple[str, ...], Group] = {}
    group_tests(groups, "tests/t.py", ids, source, files)
    assert [(g.claims, g.function, g.tests) for g in groups.values()] == [
        (("pkg/__init__.py",), "span", [ids[0]]),
        (("pkg/__init__.py",), "low", [ids[1]]),
        (("pkg/__init__.py",), "Decimal", [ids[2]]),  # nothing of the project: what it calls
    ]


def _saved_survey(tmp_path: Path, lines: list[str], max_results: int = 500) -> ToolBox:
    (tmp_path / "outputs").mkdir()  # where the toolbox saves whole outputs: outside the workspace
    (tmp_path / "outputs" / "o-1.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "ws").mkdir()
    return ToolBox(
        tmp_path / "ws",
        runner=Runner.unsandboxed(),
        max_output_chars=4_000,  # about 70 of the lines below a page
        max_results=max_results,
        outputs=tmp_path / "outputs",
    )


def _answer(tools: ToolBox, steps: Any) -> tuple[list[Any], str]:
    """Run `whole_output`'s steps against `tools`: (what it asked, what it returned)."""
    from hilbert.sim.engineer.actions import Grep, Observation

    asked = [next(steps)]
    try:
        while len(asked) < 20:
            action = asked[-1]
            if isinstance(action, Grep):
                answer = tools.grep(action.pattern, action.path)
            else:
                answer = tools.read_file(action.path, action.start, action.end)
            asked.append(steps.send(Observation(answer)))
    except StopIteration as done:
        return asked, done.value
    raise AssertionError("the lead asked for more pages than there are")


CUT = "head\n[... 1,234 more bytes; the whole output is in .hilbert/outputs/o-1.txt]\ntail"


def test_the_failing_tests_of_a_cut_survey_are_found_with_one_grep_past_any_subtests(tmp_path: Path) -> None:
    """more-itertools seed 29: a bug in `sieve` failed 40,426 subtests; the survey's saved output was
    3.3 MB of `SUBFAILED` lines, which the lead read a page at a time until its 60 calls were gone."""
    from hilbert.sim.lead.procedure import failing_tests, whole_output

    failed = [f"FAILED tests/test_a.py::test_{n} - assert 1 == 2" for n in range(29)]
    failed.append("FAILED tests/test_a.py::test_long - assert " + "x" * 400)  # grep cuts its message
    sub = [f"SUBFAILED(n={n}) tests/test_p.py::Primes::test_primes - AssertionError" for n in range(20_000)]
    tools = _saved_survey(tmp_path, [*failed[:10], *sub, *failed[10:], "30 failed, 5 passed"])
    asked, found = _answer(tools, whole_output(CUT))
    assert len(asked) == 1 and failing_tests(found) == failing_tests("\n".join(failed)), asked
    assert list(whole_output("short output")) == []


def test_a_test_id_grep_shows_in_part_is_read_from_the_pages(tmp_path: Path) -> None:
    from hilbert.sim.lead.procedure import whole_output

    saved = ["FAILED tests/test_a.py::test_one - assert 1 == 2", f"FAILED tests/test_a.py::test_{'x' * 400}"]
    asked, found = _answer(_saved_survey(tmp_path, saved), whole_output(CUT))
    assert len(asked) == 2 and found == "\n".join(saved), asked  # one grep, then the one page


def test_a_cut_survey_grep_shows_not_whole_is_read_a_page_at_a_time(tmp_path: Path) -> None:
    from hilbert.sim.engineer.actions import Read
    from hilbert.sim.lead.procedure import PAGE_LINES, whole_output

    saved = [f"FAILED tests/test_a.py::test_{n} - assert 1 == 2" for n in range(PAGE_LINES + 30)]
    tools = _saved_survey(tmp_path, saved, max_results=100)
    asked, found = _answer(tools, whole_output(CUT))
    assert found == "\n".join(saved)
    starts = [read.start for read in asked if isinstance(read, Read)]
    assert starts[0] == 1 and starts == sorted(set(starts)) and 5 <= len(starts) <= 8, starts


def test_a_long_unittest_file_is_read_in_parts_and_its_tests_grouped_by_what_their_class_names(
    tmp_path: Path,
) -> None:
    from hilbert.sim.engineer.actions import Observation, Read, Run
    from hilbert.sim.lead.procedure import Group, group_tests, read_tests

    filler = "".join(
        f"\n\nclass Filler{n}Test(unittest.TestCase):\n    def test_it(self):\n"
        f"        self.assertEqual(pkg.a.double({n}), {2 * n})\n"
        for n in range(120)
    )
    source = (
        f"import unittest\n\nimport pkg.a\n{filler}\n\n"
        "class CheckMixin:\n    def test_twice(self):\n        self.assertEqual(self.FUNC(2), 4)\n\n\n"
        "class DoubleTest(unittest.TestCase, CheckMixin):\n    FUNC = staticmethod(pkg.a.double)\n\n\n"
        "class TwiceTest(unittest.TestCase, CheckMixin):\n    FUNC = staticmethod(pkg.a.twice)\n"
    )  # the failing tests come from a mixin, far past the first page; each class names its function
    workspace = tmp_path / "ws"
    (workspace / "tests").mkdir(parents=True)
    (workspace / "tests" / "test_a.py").write_text(source)
    (tmp_path / "outputs").mkdir()
    tools = ToolBox(
        workspace, runner=Runner.unsandboxed(), max_output_chars=4_000, outputs=tmp_path / "outputs"
    )
    ids = ["tests/test_a.py::DoubleTest::test_twice", "tests/test_a.py::TwiceTest::test_twice"]
    steps = read_tests("tests/test_a.py", ids)
    asked = [next(steps)]
    try:
        while len(asked) < 20:
            action = asked[-1]
            if isinstance(action, Read):
                answer = tools.read_file(action.path, action.start, action.end)
            else:
                assert isinstance(action, Run)
                done = subprocess.run(
                    action.command, shell=True, cwd=workspace, capture_output=True, text=True
                )
                answer = done.stdout
            asked.append(steps.send(Observation(answer)))
        raise AssertionError("the lead read more than it needs")
    except StopIteration as finished:
        text = finished.value
    groups: dict[tuple[str, ...], Group] = {}
    group_tests(groups, "tests/test_a.py", ids, text, {"pkg/__init__.py", "pkg/a.py"})
    assert [(g.claims, g.function, g.tests) for g in groups.values()] == [
        (("pkg/a.py",), "double", [ids[0]]),
        (("pkg/a.py",), "twice", [ids[1]]),
    ]
    reads = [action for action in asked if isinstance(action, Read)]
    assert 2 <= len(reads) <= 4, reads  # the first page, then the pages where the tests are
