"""The lead answers escalations with tools: in a real fleet run against the fake server's simulated
lead, and tool by tool (each refuses a bad request with a reason and changes nothing)."""

from __future__ import annotations

import asyncio
import random
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fleet_support import ENV, git_repo, readme_repo

from hilbert.commands import Runner
from hilbert.fleet.escalation import EscalationToolBox, escalation_brief
from hilbert.fleet.events import EVENTS as FLEET_KINDS
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.run import run_fleet
from hilbert.fleet.scheduler import TaskState
from hilbert.models import make_model
from hilbert.models.types import ToolCall
from hilbert.settings import Settings
from hilbert.sim.lead import escalations
from hilbert.sim.sample import generate_sample_project
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.ui.log_view import format_event
from hilbert.workspaces.integration import INTEGRATION


def test_the_lead_reassigns_a_task_a_worker_gave_up_on_and_settles_one_that_cannot_pass(
    tmp_path: Path,
) -> None:
    seed = random.randrange(1_000_000)
    project = generate_sample_project(tmp_path / "repo", seed, bugs=1)
    git_repo(project)
    bug = project.bugs[0]
    test_file = f"tests/test_{Path(bug.file).stem}.py"
    plan = Plan(
        goal="make the test suite pass",
        tasks=(
            Task(
                id="T1",
                title=f"fix {bug.file}",
                claims=(bug.file,),
                verify=f"python -m pytest -q {test_file}",
            ),
            Task(id="T2", title="the missing tests", verify="python -m pytest -q tests/test_missing.py"),
            Task(id="T3", title="after the missing tests", verify="true", depends_on=("T2",)),
        ),
    )
    # the first worker (Poincaré, on T1) stops early and claims done; with one verify round and one
    # attempt its task is escalated at once. T2's check can never pass (no such test file).
    engineer = "engineer:stop_early=1,agents=Poincaré"
    with (
        FakeServer(engineer, seed=seed) as workers_server,
        FakeServer("lead", seed=seed) as lead_server,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(
            run_fleet(
                plan,
                repo=project.path,
                root=tmp_path / "run",
                run="r1",
                model=make_model(f"anthropic:fake@{workers_server.base_url}", env={}),
                lead_model=make_model(f"openai:fake-lead@{lead_server.openai_base_url}", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of({"fleet.workers": 2, "fleet.max_attempts": 1, "gate.rounds": 1}),
            )
        )
        statuses = {task: state.status for task, state in result.states.items()}
        assert statuses == {"T1": "done", "T2": "impossible", "T3": "pending"}, (seed, statuses)
        assert result.stuck == {"T3": "depends on T2, which is impossible"}
        actions = [e.data for e in store.events(run="r1", agent="harness", kinds=["lead_action"])]
        assert [(a["action"], a["task"]) for a in actions] == [("reassign", "T1"), ("mark_impossible", "T2")]
        assert "exit 4" in actions[1]["reason"]
        # the lead's note reached the next worker on T1, who landed it
        started = [e for e in store.events(run="r1", kinds=["agent_started"]) if "Task T1:" in e.data["task"]]
        assert started[0].agent == "Poincaré" and len(started) == 2
        assert (
            "The lead's note:" in started[1].data["task"]
            and "The lead's note:" not in started[0].data["task"]
        )
        shown = "\n".join(format_event(e, store) for e in store.events(run="r1", agent="harness"))
        assert "lead: reassign T1: The last attempts did not pass" in shown
        assert "lead: mark_impossible T2: its check" in shown and "the lead is asked about T1" in shown
        assert '{"' not in shown  # every harness event has its own one-line form
        assert {e.kind for e in store.events(run="r1", agent="harness")} <= set(FLEET_KINDS)
        lead_runs = store.events(run="r1", agent="lead", kinds=["agent_started", "agent_stopped"])
        assert [e.kind for e in lead_runs][:2] == ["agent_started", "agent_stopped"]
        assert lead_runs[1].data["status"] == "finished"
    check = tmp_path / "check"
    subprocess.run(
        ["git", "clone", "-q", "-b", INTEGRATION, str(result.integration_repo), str(check)], check=True
    )
    tests = subprocess.run(
        ["python", "-m", "pytest", "-q", test_file], cwd=check, env=ENV, capture_output=True
    )
    assert tests.returncode == 0, tests.stdout.decode()[-2000:]


class Board:
    """A running fleet as far as the lead's tools can see it: the plan, the states, what was steered."""

    def __init__(self, plan: Plan, states: Mapping[str, TaskState], workers: Mapping[str, str] = {}) -> None:
        self.plan, self.states = plan, dict(states)
        self.workers = dict(workers)
        self.stopped: set[str] = set()
        self.steered: list[tuple[str, dict[str, Any]]] = []
        self.notes: dict[str, str] = {}
        self.messages: list[tuple[str, str]] = []

    def steer(
        self,
        action: str,
        detail: dict[str, Any],
        *,
        plan: Plan | None = None,
        states: Mapping[str, TaskState] = {},
        notes: Mapping[str, str] = {},
    ) -> None:
        self.steered.append((action, detail))
        self.plan = plan or self.plan
        self.states.update(states)
        self.notes.update(notes)

    def message_worker(self, worker: str, text: str) -> str:
        from hilbert.errors import UserError

        if worker.lower() not in self.workers:
            raise UserError(f"no running worker is called {worker!r}")
        self.messages.append((self.workers[worker.lower()], text))
        return self.workers[worker.lower()]


PLAN = Plan(
    goal="g",
    tasks=(
        Task(id="T1", title="one", verify="true"),
        Task(id="T2", title="two", verify="false", depends_on=("T1",)),
        Task(id="T3", title="three", verify="true", depends_on=("T2",)),
    ),
)


def call(toolbox: EscalationToolBox, name: str, **arguments: Any) -> tuple[str, bool]:
    outcome = asyncio.run(toolbox.run(ToolCall("c1", name, arguments)))
    return outcome.content, outcome.is_error


@pytest.fixture
def board() -> Board:
    return Board(
        PLAN,
        {
            "T1": TaskState("T1", "running", worker="Noether"),
            "T2": TaskState("T2", "escalated", attempts=2),
            "T3": TaskState("T3"),
        },
        workers={"noether": "Noether"},
    )


def test_split_task_adds_the_parts_and_the_task_then_depends_on_them(tmp_path: Path, board: Board) -> None:
    tools = EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed())
    parts = [
        {"id": "T2a", "title": "half", "description": "d", "verify": "true"},
        {"id": "T2b", "title": "other half", "description": "d", "verify": "true", "depends_on": ["T2a"]},
    ]
    text, error = call(tools, "split_task", task="T2", into=parts)
    assert not error, text
    assert [t.id for t in board.plan.tasks] == ["T1", "T2a", "T2b", "T2", "T3"]
    assert board.plan.tasks[3].depends_on == ("T1", "T2a", "T2b")
    assert board.states["T2"] == TaskState("T2", "pending", attempts=0, reopened=1)
    assert board.states["T2a"] == TaskState("T2a", reopened=1)  # its parts cannot be split for ever
    assert board.steered == [("split_task", {"task": "T2", "into": ["T2a", "T2b"]})]


def test_a_part_that_depends_on_the_task_it_splits_is_a_cycle_and_nothing_changes(
    tmp_path: Path, board: Board
) -> None:
    tools = EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed())
    parts = [{"id": "T2a", "title": "half", "description": "d", "verify": "true", "depends_on": ["T2"]}]
    text, error = call(tools, "split_task", task="T2", into=parts)
    assert error and "dependency cycle" in text and "T2a" in text
    assert board.plan is PLAN and board.steered == []


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("reassign", {"task": "T9", "note": "n"}, "there is no task 'T9'"),
        ("reassign", {"task": "T1", "note": "n"}, "cannot reassign T1 while it is running"),
        ("reassign", {"task": "T2", "note": " "}, "`note` must be a non-empty string"),
        ("mark_impossible", {"task": "T1", "reason": "r"}, "cannot mark impossible T1 while it is running"),
        (
            "add_task",
            {"task": {"id": "T1", "title": "t", "description": "d", "verify": "x"}},
            "already in the plan",
        ),
        ("add_task", {"task": {"id": "T4", "title": "t", "description": "d"}}, "task.verify: Field required"),
        (
            "add_task",
            {"task": {"id": "T4", "title": "t", "description": "d", "verify": "x", "depends_on": ["T8"]}},
            "not in the plan",
        ),
        ("message_worker", {"worker": "Gauss", "text": "hi"}, "no running worker is called 'Gauss'"),
        ("write_file", {"path": "x", "content": "y"}, "unknown tool 'write_file'"),
    ],
)
def test_a_bad_request_is_a_tool_error_saying_why_and_changes_nothing(
    tmp_path: Path, board: Board, tool: str, arguments: dict[str, Any], says: str
) -> None:
    before = dict(board.states)
    text, error = call(EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed()), tool, **arguments)
    assert error and says in text, text
    assert board.states == before and board.plan is PLAN and board.steered == [] and board.messages == []


def test_a_task_is_reopened_at_most_max_reopens_times(tmp_path: Path, board: Board) -> None:
    tools = EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed(), max_reopens=1)
    assert not call(tools, "reassign", task="T2", note="try the other branch")[1]
    assert board.notes == {"T2": "try the other branch"}
    board.states["T2"] = TaskState("T2", "escalated", attempts=2, reopened=1)  # it failed again
    text, error = call(tools, "reassign", task="T2", note="again")
    assert error and "reopened 1 times already" in text and "mark it impossible" in text
    assert not call(tools, "mark_impossible", task="T2", reason="cannot be done")[1]
    assert board.states["T2"].status == "impossible"


def test_add_task_and_message_worker_change_the_plan_and_reach_the_worker(
    tmp_path: Path, board: Board
) -> None:
    tools = EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed())
    new = {
        "id": "T4",
        "title": "docs",
        "description": "write them",
        "verify": "test -f README.md",
        "depends_on": ["T1"],
    }
    assert not call(tools, "add_task", task=new)[1]
    assert board.plan.tasks[-1].id == "T4" and board.states["T4"] == TaskState("T4")
    text, error = call(tools, "message_worker", worker="noether", text="T2 needs your helper")
    assert not error and "Noether" in text
    assert board.messages == [("Noether", "T2 needs your helper")]


def test_the_brief_lists_each_escalated_task_with_why_its_last_attempt_did_not_land() -> None:
    states = {
        "T1": TaskState("T1", "done"),
        "T2": TaskState("T2", "escalated", 2, reopened=1),
        "T3": TaskState("T3"),
    }
    brief = escalation_brief(
        PLAN, states, ["T2"], {"T2": "verify → exit 1\n```\nboom"}, running={"T4": "Gauß"},
        held=['P1 add_task T9 "nine" — asked by Noether'], done=["reassign T3 (start from the tip)"],
    )  # fmt: skip
    assert "## T2 — two" in brief and "verify: `false`" in brief
    # after a resume: what waits for the person, and what a session that died did, are not done again
    assert "Waiting for the person's decision (do not propose these again): P1 add_task T9" in brief
    assert "interrupted (do not repeat): reassign T3 (start from the tip)" in brief
    assert "attempts: 2 (reopened before: 1)" in brief
    assert "1 done, 1 escalated, 1 pending" in brief and "T4 (Gauß)" in brief
    assert brief.count("```") == 2  # the reason cannot close the block it is quoted in


def test_an_escalation_when_nothing_else_runs_still_reaches_the_lead_who_acts_at_once(tmp_path: Path) -> None:
    """One task whose check never passes: the lead reassigns it (its note reaches every later attempt,
    and the task restarts while the lead is still talking), then marks it impossible; the run ends."""
    from hilbert.testing.fake_server import ScriptedResponder

    repo = readme_repo(tmp_path / "repo")
    gives_up = ScriptedResponder.from_turns(
        [{"tool_calls": [{"name": "finish", "arguments": {"claim": "done", "evidence": "trust me"}}]}]
    )
    plan = Plan(goal="g", tasks=(Task(id="T1", title="never", verify="python -c 'raise SystemExit(1)'"),))
    with (
        FakeServer(gives_up) as workers,
        FakeServer("lead", latency="ttft=0.3,tps=inf") as lead,
        EventStore.open(tmp_path / "log.db") as store,
    ):
        result = asyncio.run(
            run_fleet(
                plan,
                repo=repo,
                root=tmp_path / "run",
                run="r",
                model=make_model(f"openai:w@{workers.openai_base_url}", env={}),
                lead_model=make_model(f"anthropic:lead@{lead.base_url}", env={}),
                store=store,
                runner=Runner.unsandboxed(ENV),
                settings=Settings.of(
                    {"fleet.workers": 1, "fleet.max_attempts": 2, "gate.rounds": 1, "commands.test": "true"}
                ),
            )
        )
        events = store.events(run="r")
    assert result.states["T1"].status == "impossible"
    actions = [e.data["action"] for e in events if e.kind == "lead_action"]
    assert actions == ["reassign", "mark_impossible"]
    prompts = [e.data["task"] for e in events if e.kind == "agent_started" and e.agent != "lead"]
    assert len(prompts) == 4  # two attempts, reassigned, two more
    assert [p.count("The lead's note:") for p in prompts] == [0, 0, 1, 1]
    # the reassigned task started while the lead was still in its session, not after it
    reassigned = next(e.id for e in events if e.kind == "lead_action")
    restarted = next(
        e.id for e in events if e.kind == "task_state" and e.id > reassigned and e.data["status"] == "running"
    )
    first_session_end = next(e.id for e in events if e.agent == "lead" and e.kind == "agent_stopped")
    assert restarted < first_session_end
    assert [e.kind for e in events if e.agent == "harness"][-1] == "fleet_finished"


def test_the_lead_may_not_reopen_a_task_the_person_stopped(tmp_path: Path, board: Board) -> None:
    board.stopped.add("T2")
    text, error = call(
        EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed()), "reassign", task="T2", note="go on"
    )
    assert error and "stopped by the person" in text and board.steered == []


def test_a_task_that_did_not_land_on_several_test_files_is_split_one_part_per_file(
    tmp_path: Path, board: Board
) -> None:
    """The simulated lead's answer (cachetools, seed 18: one task of 67 failing tests that three bugs
    break; each attempt fixed two and ran out of turns, and a task lands only whole): one part per
    test file its check runs, the claims shared (also when the stop gate still refused: seed 19). The
    split goes through the steering tool as written; a check that runs one file, or a merge conflict
    (the fix is there, the tip moved), is reassigned as before."""
    verify = "python -m pytest -q tests/test_a.py tests/test_b.py::TestB::test_x tests/test_b.py::test_y"
    states = {"T1": TaskState("T1", "done"), "T2": TaskState("T2", "escalated", attempts=2)}
    plan = Plan(
        goal="g",
        tasks=(
            Task(id="T1", title="one", verify="true"),
            Task(id="T2", title="two", verify=verify, claims=("src/m.py",), allow_shared_claims=True),
        ),
    )
    why = "halted: turn limit reached (60 model calls)"
    [case] = escalations.read_brief(escalation_brief(plan, states, ["T2"], {"T2": why}))
    step = escalations.decide(case)
    assert step.tool == "split_task", step
    parts = step.arguments["into"]
    assert [(p["id"], p["verify"]) for p in parts] == [
        ("T2-1", "python -m pytest -q tests/test_a.py"),
        ("T2-2", "python -m pytest -q tests/test_b.py::TestB::test_x tests/test_b.py::test_y"),
    ]
    assert all(p["claims"] == ["src/m.py"] and p["allow_shared_claims"] for p in parts)
    board.plan = plan
    tools = EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed())
    text, error = call(tools, "split_task", **step.arguments)
    assert not error, text
    assert [t.id for t in board.plan.tasks] == ["T1", "T2-1", "T2-2", "T2"]
    gate = "halted: the stop gate still refuses after 3 rounds: verify: 39 test(s) failed"
    [case] = escalations.read_brief(escalation_brief(plan, states, ["T2"], {"T2": gate}))
    assert escalations.decide(case).tool == "split_task"
    conflict = "the merge queue: conflict in src/m.py"
    for other_verify, other_why in ((verify, conflict), ("python -m pytest -q tests/test_a.py", why)):
        other = Plan(goal="g", tasks=(plan.tasks[0], Task(id="T2", title="two", verify=other_verify)))
        [case] = escalations.read_brief(escalation_brief(other, states, ["T2"], {"T2": other_why}))
        assert escalations.decide(case).tool == "reassign", other_why


def test_a_task_over_one_test_file_that_did_not_land_is_split_by_the_classes_of_the_tests_it_lists(
    tmp_path: Path, board: Board
) -> None:
    """cachetools, seed 20: one task over `tests/test_cached.py`, whose failing tests two bugs break
    (one in each of two test classes); each attempt fixed one and ran out of turns. The brief now shows
    what the task asks (its list of failing tests, quoted: a heading in it is not a section of the
    brief); the simulated lead splits by the listed tests' classes, module-level tests one more part."""
    listed = [
        "tests/test_cached.py::CacheWrapperTest::test_decorator",
        "tests/test_cached.py::CacheWrapperTest::test_decorator_info",
        "tests/test_cached.py::NoneWrapperTest::test_decorator_info",
        "tests/test_cached.py::test_module_level",
    ]
    description = "These tests fail:\n" + "".join(f"- `{t}`\n" for t in listed)
    description += "\n## Not a section\nwhy the last attempt did not land:\nconflict\n"  # nor a reason
    verify = "python -m pytest -q tests/test_cached.py"
    task = Task(id="T2", title="two", verify=verify, description=description, claims=("src/m.py",))
    plan = Plan(goal="g", tasks=(Task(id="T1", title="one", verify="true"), task))
    states = {"T1": TaskState("T1", "done"), "T2": TaskState("T2", "escalated", attempts=2)}
    brief = escalation_brief(plan, states, ["T2"], {"T2": "halted: turn limit reached (60 model calls)"})
    assert "what the task asks:\n> These tests fail:" in brief and "> ## Not a section" in brief
    [case] = escalations.read_brief(brief)
    assert case.reason == "```text\nhalted: turn limit reached (60 model calls)\n```", case.reason
    step = escalations.decide(case)
    assert step.tool == "split_task", step
    assert [(p["id"], p["verify"]) for p in step.arguments["into"]] == [
        ("T2-1", f"python -m pytest -q {listed[0]} {listed[1]}"),
        ("T2-2", f"python -m pytest -q {listed[2]}"),
        ("T2-3", f"python -m pytest -q {listed[3]}"),
    ]
    board.plan = plan
    text, error = call(EscalationToolBox(tmp_path, board, runner=Runner.unsandboxed()), "split_task",
                       **step.arguments)  # fmt: skip
    assert not error, text
    assert [t.id for t in board.plan.tasks] == ["T1", "T2-1", "T2-2", "T2-3", "T2"]
    # tests of one class, or a check that names tests of one class only: one part per test
    for other in (listed[:2], listed):
        one = task.model_copy(update={"description": "".join(f"- `{t}`\n" for t in other),
                                      "verify": f"python -m pytest -q {' '.join(listed[:2])}"})  # fmt: skip
        [case] = escalations.read_brief(escalation_brief(Plan(goal="g", tasks=(one,)), states, ["T2"], {}))
        step = escalations.decide(case)
        assert step.tool == "split_task", step
        assert [p["verify"] for p in step.arguments["into"]] == [
            f"python -m pytest -q {t}" for t in listed[:2]
        ]
    # one failing test: reassigned as before
    one = task.model_copy(
        update={"description": f"- `{listed[0]}`\n", "verify": f"python -m pytest -q {listed[0]}"}
    )
    [case] = escalations.read_brief(escalation_brief(Plan(goal="g", tasks=(one,)), states, ["T2"], {}))
    assert escalations.decide(case).tool == "reassign"


def test_a_task_over_the_failing_tests_of_one_class_is_split_one_part_per_test() -> None:
    """cachetools, seed 26: `TLRUCache`'s seven failing tests, which three bugs break, were one task;
    each attempt spent its 60 calls on the first test, which two of the bugs break, and the lead
    reassigned it, then gave up. Split per test (at most eight parts, the tests shared out in turn
    beyond that), a part whose test one bug breaks can land."""
    tests = [f"tests/test_t.py::TCase::test_{n}" for n in range(10)]
    description = "These tests fail:\n" + "".join(f"- `{t}`\n" for t in tests)
    task = Task(
        id="T3", title="three", verify=f"python -m pytest -q {' '.join(tests)}", description=description
    )
    states = {"T3": TaskState("T3", "escalated", attempts=2)}
    why = {"T3": "halted: turn limit reached (60 model calls)"}
    [case] = escalations.read_brief(escalation_brief(Plan(goal="g", tasks=(task,)), states, ["T3"], why))
    step = escalations.decide(case)
    assert step.tool == "split_task", step
    parts = step.arguments["into"]
    assert [p["verify"].split()[4:] for p in parts] == [
        [tests[0], tests[8]], [tests[1], tests[9]], *[[t] for t in tests[2:8]]
    ]  # fmt: skip
    assert parts[0]["title"] == f"Part of T3: make {tests[0]} and 1 more pass", parts[0]["title"]
    # a part of a split task (reopened once, as often as its whole: cachetools seed 26's T1-7, the
    # part of `tests/test_tlru.py`) is split by its tests once more; over one test it stops
    reopened = {"T3": TaskState("T3", "escalated", attempts=2, reopened=1)}
    [case] = escalations.read_brief(escalation_brief(Plan(goal="g", tasks=(task,)), reopened, ["T3"], why))
    assert escalations.decide(case).tool == "split_task"
    one = task.model_copy(update={"verify": f"python -m pytest -q {tests[0]}"})
    [case] = escalations.read_brief(escalation_brief(Plan(goal="g", tasks=(one,)), reopened, ["T3"], why))
    assert escalations.decide(case).tool == "mark_impossible"
