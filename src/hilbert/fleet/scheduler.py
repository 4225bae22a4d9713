"""The scheduler's decisions: which tasks may start now, what to do after a failure, what is blocked.

Pure functions over frozen data — no clock, no asyncio, no store — so the run loop, status views and resume
derive the same answers from the same task states (which the event log holds). A task's state moves

    pending → running → verifying → done (merged)
       ↑         └──────────┴──→ failed ──→ pending (a retry, `attempts` + 1) | escalated (to the lead)
       ├── the lead may reopen an escalated task;   the lead may mark one no worker holds impossible
       └── the person reopens one that needs them (`hilbert retry`): escalated with no lead to answer
           it, or the lead gave up on it, becomes needs_you (`hilbert.fleet.person`)

A task with no `TaskState` in the mapping is pending with no attempts. Two tasks conflict when a claim of
one is a path prefix of a claim of the other (`src` and `src/x.py`, never `src/a.py` and `src/ab.py`),
unless either says `allow_shared_claims`. What lives elsewhere: running workers (the run loop), the plan's
shape and dependency order (`plan`), and persisting states (the store).
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Literal, get_args

from hilbert.errors import RunError, UserError
from hilbert.fleet.plan import Plan, Task

Status = Literal["pending", "running", "verifying", "done", "failed", "escalated", "impossible", "needs_you"]
STATUSES: frozenset[str] = frozenset(get_args(Status))
ACTIVE: frozenset[str] = frozenset({"running", "verifying"})
"""A worker holds the task: it counts against the concurrency limit and holds its claims."""
DEAD: frozenset[str] = frozenset({"impossible", "escalated", "needs_you"})
"""The task will not be done unless the lead or the person acts, so its dependents can never start."""
SETTLED: frozenset[str] = frozenset({"done"}) | DEAD


@dataclass(frozen=True)
class TaskState:
    """Where one task stands: its status, how many attempts have failed so far (since the lead last
    reopened it), who holds it, and how often the lead reopened it."""

    task_id: str
    status: Status = "pending"
    attempts: int = 0
    worker: str | None = None
    reopened: int = 0  # times the lead reopened it (reassigned or split) after it was escalated

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise RunError(
                f"task {self.task_id}: unknown status {self.status!r}",
                hint=f"a status is one of {', '.join(sorted(STATUSES))}",
            )
        if self.attempts < 0:
            raise RunError(f"task {self.task_id}: attempts is {self.attempts}", hint="attempts counts from 0")


@dataclass(frozen=True)
class Decision:
    """What to do with a task that failed: `retry` (its new state is pending) or `escalate` to the lead."""

    kind: Literal["retry", "escalate"]
    state: TaskState
    reason: str


def _normalize_claim(claim: str) -> str:
    path = posixpath.normpath(claim.replace("\\", "/"))
    return "" if path == "." else path.strip("/")


def _paths_overlap(a: str, b: str) -> bool:
    """One path is the other or lies under it; "" is the whole repository."""
    return not a or not b or a == b or b.startswith(a + "/") or a.startswith(b + "/")


def claims_overlap(a: Task, b: Task) -> bool:
    """Whether `a` and `b` may not run at the same time because they claim overlapping paths."""
    if a.allow_shared_claims or b.allow_shared_claims:
        return False
    mine = [_normalize_claim(claim) for claim in a.claims]
    theirs = [_normalize_claim(claim) for claim in b.claims]
    return any(_paths_overlap(x, y) for x in mine for y in theirs)


def _states(plan: Plan, states: Mapping[str, TaskState]) -> dict[str, TaskState]:
    """A state for every task in the plan (pending if absent); a state for no task of the plan is an error."""
    known = {task.id for task in plan.tasks}
    for key, state in states.items():
        if key not in known:
            raise RunError(
                f"there is a state for task {key!r}, which is not in the plan",
                hint="derive states from the same plan, or add the task to the plan first",
            )
        if state.task_id != key:
            raise RunError(f"the state under {key!r} is for task {state.task_id!r}", hint="key by task_id")
    return {task.id: states.get(task.id, TaskState(task.id)) for task in plan.tasks}


def ready(
    plan: Plan, states: Mapping[str, TaskState], *, max_running: int, behind_queue: Collection[str] = ()
) -> list[str]:
    """Tasks that may start now, in `plan.order()`: pending, every dependency done, no claim overlapping a
    running or verifying task nor one chosen before it here, and no more than the free slots under
    `max_running` (which counts running and verifying tasks). A task in `behind_queue` (its last candidate
    conflicted, and candidates wait in the merge queue) waits while another task is verifying: a retry
    that starts before the candidates ahead of it land starts from a tip without them, and conflicts
    again."""
    if max_running < 1:
        raise UserError(f"max_running is {max_running}", hint="allow at least one task to run at a time")
    current = _states(plan, states)
    tasks = {task.id: task for task in plan.tasks}
    holding = [tasks[task_id] for task_id, state in current.items() if state.status in ACTIVE]
    slots = max_running - len(holding)
    chosen: list[str] = []
    for task_id in plan.order():
        if len(chosen) >= slots:
            break
        task = tasks[task_id]
        if current[task_id].status != "pending":
            continue
        if any(current[dep].status != "done" for dep in task.depends_on):
            continue
        if task_id in behind_queue and any(s.status == "verifying" for s in current.values()):
            continue
        if any(claims_overlap(task, other) for other in holding):
            continue
        chosen.append(task_id)
        holding.append(task)
    return chosen


def after_failure(task: Task, state: TaskState, *, max_attempts: int) -> Decision:
    """A failed attempt at `task`: retry it (pending again, `attempts` + 1) while fewer than `max_attempts`
    attempts have failed, else escalate it to the lead. Each retry gets a fresh per-attempt budget."""
    if max_attempts < 1:
        raise UserError(f"max_attempts is {max_attempts}", hint="allow at least one attempt per task")
    if state.task_id != task.id:
        raise RunError(f"the state of task {state.task_id} was given for task {task.id}", hint="pass its own")
    if state.status not in ACTIVE | {"failed"}:
        raise RunError(
            f"task {task.id} cannot fail while {state.status}",
            hint="only a running, verifying or failed task has an attempt that failed",
        )
    failed = state.attempts + 1
    if failed < max_attempts:
        reason = f"attempt {failed} of {max_attempts} failed; retrying"
        return Decision("retry", replace(state, status="pending", attempts=failed, worker=None), reason)
    reason = f"all {max_attempts} attempts failed; the lead decides"
    return Decision("escalate", replace(state, status="escalated", attempts=failed, worker=None), reason)


def _stuck(plan: Plan, current: dict[str, TaskState], causes: frozenset[str]) -> dict[str, str]:
    """Pending tasks with a dependency, direct or through pending tasks, whose status is in `causes`."""
    tasks = {task.id: task for task in plan.tasks}
    root: dict[str, str] = {}  # a stuck pending task -> the dependency at the root of it
    reasons: dict[str, str] = {}
    for task_id in plan.order():  # dependencies come first
        if current[task_id].status != "pending":
            continue
        for dep in tasks[task_id].depends_on:
            status = current[dep].status
            if status in causes:
                root[task_id] = dep
                reasons[task_id] = f"depends on {dep}, which is {status}"
                break
            if dep in root:
                cause = root[task_id] = root[dep]
                reasons[task_id] = f"depends on {dep}, which waits on {cause} ({current[cause].status})"
                break
    return reasons


def blocked(plan: Plan, states: Mapping[str, TaskState]) -> dict[str, str]:
    """Pending tasks that cannot start while a dependency (direct or further up) is failed, impossible or
    escalated, each with why, naming that dependency."""
    return _stuck(plan, _states(plan, states), DEAD | {"failed"})


def deadlocked(plan: Plan, states: Mapping[str, TaskState]) -> list[str]:
    """Pending tasks, in plan order, that can never become ready: a dependency, direct or further up, is
    impossible or escalated. (A failed dependency may still be retried, so it deadlocks nothing.)"""
    stuck = _stuck(plan, _states(plan, states), DEAD)
    return [task_id for task_id in plan.order() if task_id in stuck]


def is_finished(plan: Plan, states: Mapping[str, TaskState]) -> bool:
    """Nothing is left for the scheduler: every task is done, impossible or escalated, or deadlocked behind
    one. Escalated tasks await the lead, who may reopen them; whether the run succeeded is whether every
    task is done."""
    current = _states(plan, states)
    stuck = _stuck(plan, current, DEAD)
    return all(state.status in SETTLED or task_id in stuck for task_id, state in current.items())
