"""The scheduler: tasks start in dependency order, never two with overlapping claims at once, never more than
the limit; a failed task is retried then escalated; a run that cannot finish says which tasks are stuck."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from hilbert.errors import RunError, UserError
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.scheduler import (
    Status,
    TaskState,
    after_failure,
    blocked,
    claims_overlap,
    deadlocked,
    is_finished,
    ready,
)


def task(task_id: str, *deps: str, claims: tuple[str, ...] = (), shared: bool = False) -> Task:
    return Task(
        id=task_id,
        title=f"do {task_id}",
        verify="true",
        depends_on=deps,
        claims=claims,
        allow_shared_claims=shared,
    )


def plan(*tasks: Task) -> Plan:
    return Plan(goal="a goal", tasks=tasks)


def at(status: Status, *ids: str, attempts: int = 0) -> dict[str, TaskState]:
    return {
        i: TaskState(i, status, attempts, "noether" if status in ("running", "verifying") else None)
        for i in ids
    }


# --- claims --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mine", "theirs", "overlap"),
    [
        (("src",), ("src/x.py",), True),
        (("src/x.py",), ("src",), True),
        (("src/a.py",), ("src/ab.py",), False),
        (("src/a",), ("src/ab/c.py",), False),
        (("src/a.py",), ("src/a.py",), True),
        (("docs/",), ("./docs/guide.md",), True),
        (("src\\y.py",), ("src/y.py",), True),
        (("src//y.py",), ("src/./y.py",), True),
        ((".",), ("anything/at/all.py",), True),
        (("tests", "src/a.py"), ("docs", "src/a.py"), True),
        (("tests", "src/a.py"), ("docs", "src/b.py"), False),
        ((), ("src",), False),
        ((), (), False),
    ],
)
def test_claims_overlap_by_path_prefix(mine: tuple[str, ...], theirs: tuple[str, ...], overlap: bool) -> None:
    assert claims_overlap(task("A", claims=mine), task("B", claims=theirs)) is overlap
    assert claims_overlap(task("B", claims=theirs), task("A", claims=mine)) is overlap


def test_a_task_that_allows_shared_claims_conflicts_with_nothing() -> None:
    shared = task("A", claims=("src",), shared=True)
    assert not claims_overlap(shared, task("B", claims=("src/x.py",)))
    assert not claims_overlap(task("B", claims=("src/x.py",)), shared)


# --- ready ---------------------------------------------------------------------------------------------


def test_tasks_start_only_when_every_dependency_is_merged() -> None:
    p = plan(task("T1"), task("T2", "T1"), task("T3", "T1", "T2"), task("T4"))
    assert ready(p, {}, max_running=10) == ["T1", "T4"]
    assert ready(p, at("running", "T1"), max_running=10) == ["T4"]
    assert ready(p, at("verifying", "T1"), max_running=10) == ["T4"]
    assert ready(p, at("done", "T1") | at("running", "T4"), max_running=10) == ["T2"]
    assert ready(p, at("done", "T1", "T4") | at("failed", "T2"), max_running=10) == []
    assert ready(p, at("done", "T1", "T2", "T4"), max_running=10) == ["T3"]
    assert ready(p, at("done", "T1", "T2", "T3", "T4"), max_running=10) == []


def test_ready_tasks_come_in_dependency_order_then_plan_order() -> None:
    p = plan(task("B", "A"), task("A"), task("C"))
    assert ready(p, {}, max_running=10) == ["A", "C"]
    assert ready(p, at("done", "A"), max_running=10) == ["B", "C"]


def test_a_retry_after_a_conflict_waits_until_the_candidates_in_the_merge_queue_land() -> None:
    p = plan(task("T1"), task("T2"), task("T3"))
    queued = at("verifying", "T1") | at("pending", "T2", "T3")
    assert ready(p, queued, max_running=10, behind_queue=["T2"]) == ["T3"]
    assert ready(p, queued | at("running", "T3"), max_running=10, behind_queue=["T2"]) == []
    assert ready(p, at("done", "T1") | at("pending", "T2", "T3"), max_running=10, behind_queue=["T2"]) == [
        "T2",
        "T3",
    ]


def test_a_task_waits_while_a_running_task_claims_an_overlapping_path() -> None:
    p = plan(
        task("T1", claims=("src",)),
        task("T2", claims=("src/x.py",)),
        task("T3", claims=("src/xy.py",)),
        task("T4", claims=("docs",)),
    )
    assert ready(p, at("running", "T2"), max_running=10) == ["T3", "T4"]
    assert ready(p, at("verifying", "T4"), max_running=10) == ["T1"]
    assert ready(p, at("done", "T2"), max_running=10) == ["T1", "T4"]


def test_two_overlapping_tasks_are_never_chosen_together() -> None:
    p = plan(task("T1", claims=("src/x.py",)), task("T2", claims=("src",)), task("T3", claims=("src/y.py",)))
    assert ready(p, {}, max_running=10) == ["T1", "T3"]


def test_tasks_that_allow_shared_claims_run_together() -> None:
    p = plan(task("T1", claims=("src",), shared=True), task("T2", claims=("src/x.py",)))
    assert ready(p, {}, max_running=10) == ["T1", "T2"]
    assert ready(p, at("running", "T1"), max_running=10) == ["T2"]


def test_never_more_than_max_running_at_once() -> None:
    p = plan(*(task(f"T{i}") for i in range(6)))
    assert ready(p, {}, max_running=4) == ["T0", "T1", "T2", "T3"]
    assert ready(p, at("running", "T0") | at("verifying", "T1"), max_running=4) == ["T2", "T3"]
    assert ready(p, at("running", "T0", "T1", "T2", "T3"), max_running=4) == []
    assert ready(p, at("running", "T0", "T1", "T2", "T3", "T4"), max_running=4) == []
    with pytest.raises(UserError, match="max_running"):
        ready(p, {}, max_running=0)


def test_states_that_do_not_match_the_plan_are_refused() -> None:
    p = plan(task("T1"))
    with pytest.raises(RunError, match="not in the plan"):
        ready(p, at("running", "T9"), max_running=2)
    with pytest.raises(RunError, match="T2"):
        ready(p, {"T1": TaskState("T2")}, max_running=2)
    with pytest.raises(RunError, match="unknown status"):
        TaskState("T1", "merged")  # type: ignore[arg-type]


# --- failures ------------------------------------------------------------------------------------------


def test_a_failed_task_is_retried_then_escalated_to_the_lead() -> None:
    t = task("T1")
    state = TaskState("T1", "running", 0, "noether")
    seen = []
    for _ in range(3):
        decision = after_failure(t, state, max_attempts=3)
        seen.append((decision.kind, decision.state.status, decision.state.attempts, decision.state.worker))
        state = replace(decision.state, status="verifying", worker="gauss")
    assert seen == [
        ("retry", "pending", 1, None),
        ("retry", "pending", 2, None),
        ("escalate", "escalated", 3, None),
    ]
    assert "3 attempts failed" in decision.reason


def test_one_attempt_allowed_means_the_first_failure_escalates() -> None:
    decision = after_failure(task("T1"), TaskState("T1", "failed"), max_attempts=1)
    assert decision.kind == "escalate" and decision.state.status == "escalated"


def test_only_a_task_that_was_attempted_can_fail() -> None:
    with pytest.raises(RunError, match="cannot fail while done"):
        after_failure(task("T1"), TaskState("T1", "done"), max_attempts=3)
    with pytest.raises(RunError):
        after_failure(task("T1"), TaskState("T2", "running"), max_attempts=3)
    with pytest.raises(UserError):
        after_failure(task("T1"), TaskState("T1", "running"), max_attempts=0)


def test_blocked_tasks_name_the_dependency_that_blocks_them() -> None:
    p = plan(task("T1"), task("T2", "T1"), task("T3", "T2"), task("T4"), task("T5", "T4"), task("T6"))
    states = at("impossible", "T1") | at("failed", "T4")
    assert blocked(p, states) == {
        "T2": "depends on T1, which is impossible",
        "T3": "depends on T2, which waits on T1 (impossible)",
        "T5": "depends on T4, which is failed",
    }
    assert deadlocked(p, states) == ["T2", "T3"]  # T4 may still be retried
    assert not is_finished(p, states)
    assert ready(p, states, max_running=5) == ["T6"]
    finished = states | at("done", "T6") | at("escalated", "T4")
    assert deadlocked(p, finished) == ["T2", "T3", "T5"]
    assert is_finished(p, finished)


def test_a_task_with_a_dead_dependency_is_deadlocked_even_if_another_is_merely_failed() -> None:
    p = plan(task("T1"), task("T2"), task("T3", "T1", "T2"))
    states = at("failed", "T1") | at("escalated", "T2")
    assert deadlocked(p, states) == ["T3"]
    assert blocked(p, states) == {"T3": "depends on T1, which is failed"}


def test_a_run_is_finished_when_every_task_is_settled() -> None:
    p = plan(task("T1"), task("T2", "T1"))
    assert not is_finished(p, {})
    assert not is_finished(p, at("done", "T1"))
    assert not is_finished(p, at("done", "T1") | at("verifying", "T2"))
    assert is_finished(p, at("done", "T1", "T2"))
    assert is_finished(p, at("escalated", "T1"))
    # the lead reopens an escalated task: the run has work again
    assert not is_finished(p, at("pending", "T1", attempts=3))


# --- a simulated run -----------------------------------------------------------------------------------

PATHS = [
    "src",
    "src/a",
    "src/a/x.py",
    "src/ab.py",
    "src/b.py",
    "docs",
    "docs/guide.md",
    "tests/t.py",
    "README.md",
]


def random_plan(rng: random.Random, size: int) -> Plan:
    tasks = []
    for i in range(size):
        earlier = [f"T{j}" for j in range(i)]
        deps = rng.sample(earlier, k=min(len(earlier), rng.choice([0, 0, 1, 1, 2, 3])))
        claims = rng.sample(PATHS, k=rng.choice([0, 1, 1, 2]))
        tasks.append(task(f"T{i}", *deps, claims=tuple(claims), shared=rng.random() < 0.05))
    rng.shuffle(tasks)  # plan order is not dependency order
    return plan(*tasks)


def simulate(
    p: Plan, rng: random.Random, *, max_running: int, fail_rate: float, impossible_rate: float
) -> dict:
    """Drive tasks ready → running → verifying → done (or failed → retried/escalated), checking the invariants
    at every step; returns the final states."""
    tasks = {t.id: t for t in p.tasks}
    states: dict[str, TaskState] = {}
    steps = 0
    while True:
        steps += 1
        assert steps < 10_000, "the simulated run did not end"
        for task_id in ready(p, states, max_running=max_running):
            assert all(states[dep].status == "done" for dep in tasks[task_id].depends_on)
            states[task_id] = replace(states.get(task_id, TaskState(task_id)), status="running", worker="w")
        active = [tasks[i] for i, s in states.items() if s.status in ("running", "verifying")]
        assert len(active) <= max_running
        for n, a in enumerate(active):
            assert not any(claims_overlap(a, b) for b in active[n + 1 :]), (a.id, [b.id for b in active])
        if not active:
            assert is_finished(p, states), "nothing runs, nothing is ready, yet the run is not finished"
            return states
        assert not is_finished(p, states)
        for t in active:  # each active task moves on, or not yet
            state = states[t.id]
            roll = rng.random()
            if roll < 0.4:
                continue
            if state.status == "running":
                states[t.id] = replace(state, status="verifying")
            elif roll < 0.4 + impossible_rate:
                states[t.id] = replace(state, status="impossible", worker=None)
            elif roll < 0.4 + impossible_rate + fail_rate:
                states[t.id] = after_failure(t, replace(state, status="failed"), max_attempts=3).state
            else:
                states[t.id] = replace(state, status="done", worker=None)


@pytest.mark.parametrize("seed", range(3))
def test_a_simulated_run_of_200_tasks_respects_every_rule_and_finishes(seed: int) -> None:
    rng = random.Random(seed)
    p = random_plan(rng, 200)
    states = simulate(p, rng, max_running=rng.choice([1, 4, 16, 64]), fail_rate=0.0, impossible_rate=0.0)
    assert all(states[t.id].status == "done" for t in p.tasks)
    assert deadlocked(p, states) == [] and blocked(p, states) == {}


def test_a_simulated_run_with_failures_retries_escalates_and_reports_what_is_stuck() -> None:
    rng = random.Random(7)
    p = random_plan(rng, 200)
    states = simulate(p, rng, max_running=16, fail_rate=0.3, impossible_rate=0.02)
    final = {task_id: states.get(task_id, TaskState(task_id)) for task_id in (t.id for t in p.tasks)}
    statuses = {s.status for s in final.values()}
    assert {"done", "escalated", "impossible", "pending"} <= statuses  # the seed exercises every outcome
    assert any(s.status == "done" and s.attempts > 0 for s in final.values())  # a retry succeeded
    stuck = deadlocked(p, states)
    assert sorted(stuck) == sorted(i for i, s in final.items() if s.status == "pending")
    assert set(blocked(p, states)) == set(stuck)
