"""Who answers an escalation (`hilbert.fleet.person`), pure: the reason each task that no lead will
answer gives the person, and how the fold reads the person's `hilbert retry`. Cases from a review of
the first version (each failed on it)."""

from __future__ import annotations

from hilbert.fleet import events as ev
from hilbert.fleet.final_check import EXIT, Suite, compare, repair_task
from hilbert.fleet.inbox import EVERYONE
from hilbert.fleet.person import needs_you, summary
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.scheduler import TaskState
from hilbert.fleet.state import FleetState, apply
from hilbert.store.event_store import Event

PLAN = Plan(
    goal="g", tasks=(Task(id="T1", title="t", verify="true"), Task(id="T2", title="u", verify="true"))
)


def fold(*records: ev.FleetEvent, agent: str = "harness") -> FleetState:
    state = FleetState("r", plan=PLAN)
    state.states = {"T1": TaskState("T1", "escalated", 2), "T2": TaskState("T2", "done")}
    for n, record in enumerate(records, 1):
        who = "person" if isinstance(record, ev.TaskRetryAsked) else agent
        apply(state, Event(n, "r", who, n, 0.0, record.kind, record.data()))
    return state


def why(state: FleetState, **given: bool) -> list[str]:
    options = {"lead": True, "same_model": False, "sessions_left": True, **given}
    return [e.why for e in needs_you(state, **options) if isinstance(e, ev.TaskNeedsYou)]  # type: ignore[arg-type]


def test_each_reason_no_lead_will_answer_is_named_and_a_lead_that_may_answer_keeps_it() -> None:
    assert why(fold()) == []  # the lead will be asked
    assert why(fold(), lead=False) == ["the run has no lead model"]
    assert why(fold(), same_model=True) == ["the lead runs on the workers' model, which already failed at it"]
    assert why(fold(), sessions_left=False) == ["the lead has no sessions left"]
    assert why(fold(), stopping=True) == ["the run is stopping (stopped, or its cost cap is spent)"]
    assert why(fold(ev.StopRequested(to="lead"))) == ["the lead was stopped"]
    asked = ev.LeadConsulted(tasks=["T1"], session=1)
    assert why(fold(asked)) == []  # a session works on it now
    assert why(fold(asked, ev.LeadAnswered(status="finished"))) == [
        "the lead was asked and left it escalated"
    ]
    crashed = ev.LeadAnswered(status="error", error="ModelError: 503 overloaded")
    assert why(fold(asked, crashed)) == ["the lead's session failed (ModelError: 503 overloaded)"]


def test_a_task_the_lead_later_marked_impossible_gives_that_reason_not_the_old_one() -> None:
    state = fold(
        ev.TaskNeedsYou(task="T1", why="the lead has no sessions left"),
        ev.TaskStateChanged(task="T1", status="impossible", attempts=2),
    )
    assert summary(state)[0] == "  T1 needs you: the lead marked it impossible"


def test_a_retry_reopens_the_task_clears_the_whole_run_stop_and_a_later_finish_keeps_it_pending() -> None:
    state = fold(
        ev.StopRequested(to=EVERYONE),
        ev.TaskStateChanged(task="T1", status="needs_you", attempts=2),
        ev.FleetFinished(states={"T1": "needs_you"}),
        ev.TaskRetryAsked(task="T1", edited={"id": "T1", "title": "better", "verify": "test -f x"}),
    )
    assert state.states["T1"] == TaskState("T1", "pending", 0, None, 1) and state.finished is None
    assert EVERYONE not in state.stops and state.task("T1").verify == "test -f x" and "T1" in state.retried
    # the run was leaving its loop as the retry came: finished again, the task still marked as retried
    apply(state, Event(9, "r", "harness", 9, 0.0, "fleet_finished", ev.FleetFinished(states={}).data()))
    assert state.states["T1"].status == "pending" and "T1" in state.retried  # `hilbert retry` resumes it
    # a done task, or one a lead session is deciding, is not reopened
    done = fold(ev.TaskRetryAsked(task="T2"))
    deciding = fold(ev.LeadConsulted(tasks=["T1"], session=1), ev.TaskRetryAsked(task="T1"))
    assert done.states["T2"].status == "done" and deciding.states["T1"].status == "escalated"


def test_the_final_checks_comparison_and_repair_task_hold_for_any_test_command() -> None:
    base, tip = Suite(True, (), gathered=True), Suite(False, ("t.py::a",), gathered=True)
    timed_out = Suite(False, (EXIT,), gathered=False)
    assert compare(base, tip, timed_out).new == ("t.py::a",)  # a second run that did not finish: not flaky
    collection_error = Suite(False, (EXIT,), gathered=True)
    assert compare(collection_error, tip, tip).preexisting == ("t.py::a",)
    for command in ("python -m pytest -q tests", "make test", "cd pkg && pytest | tee log"):
        task = repair_task(PLAN, 1, ["pkg/tests/test_a.py::test_x"], command, "")
        assert task is not None and task.verify == "python -m pytest -q pkg/tests/test_a.py::test_x", task
    assert repair_task(PLAN, 1, [EXIT], "make check", "").verify == "make check"  # type: ignore[union-attr]
