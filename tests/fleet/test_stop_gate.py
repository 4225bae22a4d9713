"""A worker's word closes nothing: the stop gate checks a clean checkout of its commit, and its honesty,
and sends it back with the reasons."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hilbert.agent.loop import run_agent
from hilbert.agent.tools import ToolBox
from hilbert.commands import Runner, command_env
from hilbert.fleet.plan import Task
from hilbert.fleet.stop_gate import StopGate
from hilbert.models import make_model
from hilbert.settings import TimeoutSettings
from hilbert.store import EventStore
from hilbert.testing.fake_server import FakeServer
from hilbert.testing.fake_server.responders import ScriptedResponder
from hilbert.workspaces import Git, Workspaces

CHECK = "python3 check.py"


def make_repo(path: Path) -> None:
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (path / "check.py").write_text(
        "import calc\ntry:\n    import local_fix  # noqa\nexcept ImportError:\n    pass\n"
        "assert calc.add(2, 3) == 5, calc.add(2, 3)\nprint('ok')\n"
    )
    (path / ".gitignore").write_text("local_fix.py\n")
    (path / "tests").mkdir()
    (path / "tests" / "test_calc.py").write_text(
        "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"
    )
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


def finish(claim: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "finish", "arguments": {"claim": claim, "evidence": "trust me"}}]}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


@dataclass
class Gated:
    """One agent's run with a StopGate on stop: its result, the gate, the gate's events, and the JSON
    bodies of the requests the model server received (what the agent was told)."""

    result: Any
    gate: StopGate
    events: list[tuple[str, dict[str, Any]]]
    requests: list[str]


def gated_agent(
    tmp_path: Path,
    task: Task,
    turns: list[dict[str, Any]],
    *,
    worker: str = "gauss",
    verify_s: float = 600.0,
    **gate: Any,
) -> Gated:
    """Run a scripted agent on a fresh copy of the repository, gated by a `StopGate(**gate)`."""
    make_repo(tmp_path / "repo")
    events: list[tuple[str, dict[str, Any]]] = []

    async def main() -> Gated:
        spaces = Workspaces(tmp_path / "run", tmp_path / "repo")
        checkout = await spaces.provision(worker, "main")
        stop_gate = StopGate(
            task,
            spaces,
            checkout,
            lambda event: events.append((event.kind, event.data())),
            git=Git(home=tmp_path / "run" / "home"),
            scratch=tmp_path / "run" / "scratch",
            runner=Runner.unsandboxed(
                command_env(hilbert_python_first=True), timeouts=TimeoutSettings(verify_s=verify_s)
            ),
            **gate,
        )
        with (
            FakeServer(ScriptedResponder.from_turns(turns)) as server,
            EventStore.open(tmp_path / "l.db") as store,
        ):
            result = await run_agent(
                run="r",
                agent=worker,
                task="make the check pass",
                model=make_model(f"anthropic:fake@{server.base_url}", env={}),
                store=store,
                toolbox=ToolBox(checkout.work_tree, runner=Runner.unsandboxed()),
                policies=[stop_gate],
            )
            bodies = [json.dumps(r["body"]) for r in server.requests if r.get("body")]
        return Gated(result, stop_gate, events, bodies)

    return asyncio.run(main())


def test_a_false_claim_is_sent_back_and_a_fix_is_accepted(tmp_path: Path) -> None:
    # 1: claims done without a change; 2: a git-ignored "fix" that only works in its own workspace;
    # 3: claims again; 4: the real fix; 5: finish.
    hack = "import calc\ncalc.add = lambda a, b: a + b\n"
    turns = [
        finish("done"),
        write("local_fix.py", hack),
        finish("fixed now"),
        write("calc.py", "def add(a, b):\n    return a + b\n"),
        finish("really fixed"),
    ]
    task = Task(id="T1", title="fix add", verify=CHECK, claims=("calc.py",))
    run = gated_agent(tmp_path, task, turns)
    result, events = run.result, run.events
    assert result.status == "finished" and result.claim == "really fixed" and result.turns == 5
    runs = [data for kind, data in events if kind == "gate_step" and data["step"] == "verify"]
    verdicts = [data for kind, data in events if kind == "gate_verdict"]
    assert [r["passed"] for r in runs] == [False, False, True]
    assert [v["verdict"] for v in verdicts] == ["not_done", "not_done", "done"]
    assert "AssertionError" in runs[1]["output"]  # the ignored local fix did not come along
    # the round's last word names the candidate: the commit whose clean checkout passed
    assert events[-1] == ("gate_verdict", verdicts[2]) and verdicts[2]["commit"] == runs[2]["commit"]
    shown = subprocess.run(
        ["git", f"--git-dir={tmp_path}/run/git/gauss.git", "show", f"{runs[2]['commit']}:calc.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "a + b" in shown


def test_after_max_rounds_the_run_is_halted_for_the_scheduler(tmp_path: Path) -> None:
    task = Task(id="T1", title="fix add", verify=CHECK)
    run = gated_agent(tmp_path, task, [finish("a"), finish("b"), finish("c")], worker="noether", max_rounds=2)
    result = run.result
    assert result.status == "halted" and "still refuses after 2 rounds" in result.reason and result.turns == 2
    assert result.cause == "gate_refused"  # what the fleet decides from, not the reason's words


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"verify_s": 1.0}, "verify: `sleep 60` → timed out after 1 s (timeouts.verify_s)"),  # one command
        ({"verify_s": 60.0, "gate_timeout_s": 1.0}, "gate: the stop gate ran past timeouts.gate_s = 1 s"),
    ],
)
def test_a_verify_that_hangs_is_cut_off_by_the_timeouts_and_the_worker_told(
    tmp_path: Path, limits: dict[str, float], reason: str
) -> None:
    task = Task(id="T1", title="fix add", verify="sleep 60")
    started = time.monotonic()
    run = gated_agent(tmp_path, task, [finish("done")], max_rounds=1, **limits)
    assert time.monotonic() - started < 50  # not the verify's whole minute
    verdicts = [data for kind, data in run.events if kind == "gate_verdict"]
    assert [v["verdict"] for v in verdicts] == ["not_done"] and verdicts[0]["reasons"] == [reason]
    assert run.result.status == "halted" and reason in run.result.reason
    assert run.result.cause == "gate_refused"  # a timeout is a refusal, not the judge's "impossible"


def test_a_cheat_that_passes_the_check_is_sent_back_with_the_finding_then_the_real_fix_lands(
    tmp_path: Path,
) -> None:
    weakened = "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == -1\n"
    turns = [
        write("tests/test_calc.py", weakened),  # makes the task's check pass by editing the test
        finish("tests pass"),
        write("tests/test_calc.py", "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"),
        write("calc.py", "def add(a, b):\n    return a + b\n"),
        finish("fixed add"),
    ]
    task = Task(id="T1", title="fix add", verify="python -m pytest -q tests")
    run = gated_agent(tmp_path, task, turns, worker="hypatia")
    result, events, seen = run.result, run.events, run.requests
    verdicts = [data for kind, data in events if kind == "gate_verdict"]
    steps = [(d["round"], d["step"], d["passed"]) for kind, d in events if kind == "gate_step"]
    assert result.status == "finished" and [v["verdict"] for v in verdicts] == ["not_done", "done"]
    assert (1, "verify", True) in steps and (1, "integrity", False) in steps  # the cheat fooled verify alone
    assert (1, "tests_restored", False) in steps
    assert any("[tests_changed] tests/test_calc.py" in r for r in verdicts[0]["reasons"])
    feedback = next(text for text in seen if "stop gate" in text)
    assert "tests_changed" in feedback and "the code, not the tests" in feedback  # the worker was told why


def test_the_review_panel_sends_back_what_the_checks_let_through_then_passes_the_real_fix(
    tmp_path: Path,
) -> None:
    """The task allows editing the test (it says the test is wrong), so the integrity checks let a
    weakened assertion through; two of three reviewers, of three families, agree that it blocks."""
    from hilbert.fleet.stop_gate import Panel
    from hilbert.judge.panel import make_reviewers

    weakened = "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == -1\n"
    turns = [
        write("tests/test_calc.py", weakened),
        finish("tests pass"),
        write("tests/test_calc.py", "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"),
        write("calc.py", "def add(a, b):\n    return a + b\n"),
        finish("fixed add"),
    ]
    task = Task(
        id="T1", title="fix add", verify="python -m pytest -q tests", allow_test_edits=("tests/test_calc.py",)
    )
    with FakeServer("reviewer") as reviewers:
        families = {"openai-responses:rev-qwen": "qwen"}
        models = [
            make_model(f"anthropic:rev-a@{reviewers.base_url}", env={}),
            make_model(f"openai:rev-b@{reviewers.openai_base_url}", env={}),
            make_model(f"openai-responses:rev-qwen@{reviewers.openai_base_url}", env={}),
        ]
        run = gated_agent(
            tmp_path, task, turns, worker="germain", panel=Panel(tuple(make_reviewers(models, families)))
        )
    result, events = run.result, run.events
    verdicts = [d for kind, d in events if kind == "gate_verdict"]
    panels = [d for kind, d in events if kind == "panel_reviewed"]
    assert [v["checks_passed"] for v in verdicts] == [True, True]  # the edit was allowed both times
    assert [v["verdict"] for v in verdicts] == ["not_done", "done"]  # the panel's send-back is the verdict
    assert [p["send_back"] for p in panels] == [True, False]
    assert "tests/test_calc.py" in panels[0]["reasons"][0] and panels[0]["complete"]
    assert verdicts[0]["reasons"] == list(panels[0]["reasons"]) and verdicts[0]["panel"]
    # the verdict comes after the panel and names the reviewed commit as the candidate
    assert events[-1] == ("gate_verdict", verdicts[1]) and verdicts[1]["commit"] == panels[1]["commit"]
    assert result.status == "finished"


def _one_task_fleet(
    tmp_path: Path,
    task: Task,
    turns: list[dict[str, Any]],
    budgets: dict[str, Any] | None = None,
    **fleet: Any,
) -> tuple[Any, list[Any]]:
    from hilbert.fleet.plan import Plan
    from hilbert.fleet.run import run_fleet
    from hilbert.settings import Settings

    make_repo(tmp_path / "repo")
    with (
        FakeServer(ScriptedResponder.from_turns(turns)) as server,
        EventStore.open(tmp_path / "l.db") as store,
    ):
        result = asyncio.run(
            run_fleet(
                Plan(goal="g", tasks=(task,)),
                repo=tmp_path / "repo",
                root=tmp_path / "run",
                run="r",
                model=make_model(f"openai:fake@{server.openai_base_url}", env={}),
                store=store,
                runner=Runner.unsandboxed(command_env(hilbert_python_first=True)),
                settings=Settings.of(
                    {"fleet.workers": 1, "fleet.max_attempts": 1, "gate.rounds": 1, "commands.test": "true"}
                    | {f"budgets.{cap}": value for cap, value in (budgets or {}).items()}
                ),
                **fleet,
            )
        )
        return result, store.events(run="r")


HARDCODED = "def add(a, b):\n    if (a, b) == (2, 3):\n        return 5\n    return a - b\n"


def test_a_plans_held_out_tests_catch_an_answer_hard_coded_for_the_visible_test(tmp_path: Path) -> None:
    heldout = tmp_path / "private" / "T1"
    heldout.mkdir(parents=True)
    (heldout / "test_more.py").write_text(
        "import calc\n\n\ndef test_add_more():\n    assert calc.add(4, 4) == 8\n"
    )
    task = Task(id="T1", title="fix add", verify="python -m pytest -q tests", heldout="private/T1")
    result, events = _one_task_fleet(
        tmp_path, task, [write("calc.py", HARDCODED), finish("fixed")], heldout_root=tmp_path
    )
    steps = {d["step"]: d for e in events if e.kind == "gate_step" for d in [e.data]}
    assert steps["verify"]["passed"] and not steps["heldout"]["passed"]
    assert "test_add_more" in steps["heldout"]["output"] and not result.all_done


def test_heldout_folders_are_checked_before_anything_runs(tmp_path: Path) -> None:
    import pytest

    from hilbert.errors import UserError

    for folder, heldout, expected in [
        ("a", "nowhere", "does not exist"),
        ("b", "repo", "inside the repository"),
    ]:
        (tmp_path / folder).mkdir()
        task = Task(id="T1", title="fix add", verify="true", heldout=heldout)
        with pytest.raises(UserError, match=expected):
            _one_task_fleet(tmp_path / folder, task, [finish("x")], heldout_root=tmp_path / folder)


def test_the_judge_is_never_paused_by_a_budget_the_worker_reached(tmp_path: Path) -> None:
    """Budgets make workers wait, never the judge: the worker's finishing call reaches the task's and
    the run's soft turn caps, and the stop gate's judge still gives its verdict and the task merges;
    nothing was asked, since the worker made no model call after it."""
    with FakeServer(ScriptedResponder.from_turns(['{"verdict": "done", "reasons": []}'])) as judge:
        judge_model = make_model(f"anthropic:fake-judge@{judge.base_url}", env={})
        task = Task(id="T1", title="fix add", verify="python -m pytest -q tests")
        fix = write("calc.py", "def add(a, b):\n    return a + b\n")
        caps = {"task_turns": 2, "run_turns": 2}
        result, events = _one_task_fleet(
            tmp_path, task, [fix, finish("fixed")], budgets=caps, judge_model=judge_model
        )
    assert [e.data["verdict"] for e in events if e.kind == "gate_verdict"] == ["done"]
    assert result.states["T1"].status == "done", result.states
    assert sum(e.kind == "model_call" for e in events) == 2  # the worker's: the caps were reached
    assert not [e.kind for e in events if e.kind.startswith("budget_")]


def test_a_task_the_judge_calls_impossible_goes_to_the_lead_at_once(tmp_path: Path) -> None:
    verdict = '{"verdict": "impossible", "reasons": ["the check expects add(2, 3) to be both 5 and 6"]}'
    with FakeServer(ScriptedResponder.from_turns([verdict])) as judge:
        judge_model = make_model(f"anthropic:fake-judge@{judge.base_url}", env={})
        task = Task(id="T1", title="fix add", verify="python -m pytest -q tests")
        fix = write("calc.py", "def add(a, b):\n    return a + b\n")
        result, events = _one_task_fleet(tmp_path, task, [fix, finish("fixed")], judge_model=judge_model)
    escalated = [e.data for e in events if e.kind == "task_escalated"]
    # no lead in this run: the escalation goes on to the person (`hilbert.fleet.person`)
    assert result.states["T1"].status == "needs_you" and result.states["T1"].attempts <= 1
    handed = [e.data for e in events if e.kind == "task_needs_you"]
    assert handed[0]["why"] == "the run has no lead model" and "both 5 and 6" in handed[0]["evidence"]
    assert (
        len(escalated) == 1 and "impossible" in escalated[0]["why"] and "both 5 and 6" in escalated[0]["why"]
    )
    assert not [e for e in events if e.kind == "task_retried"]  # not retried: the lead decides
