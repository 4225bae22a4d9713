"""What the run does after an attempt ends, a merge decides or a harness step fails: pure decisions over a
task's state that return the events to record (the driver records them, in order). They read the
typed outcome — its cause, its candidate — never the text of a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from hilbert.agent.policies import Cause, StopStatus
from hilbert.fleet.events import (
    FinalChecked,
    FleetEvent,
    TaskEscalated,
    TaskRetried,
    TaskStateChanged,
    TaskStopped,
)
from hilbert.fleet.merge_queue import Outcome
from hilbert.fleet.plan import Task
from hilbert.fleet.scheduler import Status, TaskState, after_failure
from hilbert.fleet.stop_gate import IMPOSSIBLE

FEEDBACK_CHARS = 4000  # of a rejection or conflict, passed on as the next attempt's feedback
NAMED_FAILURES = 30  # new failures named one by one in a rejection's feedback


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended: its loop's status and cause, and its candidate ref (None: nothing to merge)."""

    status: StopStatus
    cause: Cause
    reason: str
    candidate: str | None = None


@dataclass(frozen=True)
class FleetResult:
    run: str
    states: Mapping[str, TaskState]
    integration_repo: Path
    integration_tip: str
    stuck: Mapping[str, str]
    interrupted: bool = False
    final: FinalChecked | None = None  # the last final check (`hilbert.fleet.final_check`)

    @property
    def all_done(self) -> bool:
        """Every task merged, or given up and found fixed by another task's merge (`passing`), and the
        last final check found nothing new failing (`hilbert run` exits 0)."""
        green = self.final is None or not (self.final.new or self.final.error)
        fixed = set(self.final.passing) if self.final else set()
        return green and all(s.status == "done" or t in fixed for t, s in self.states.items())


def changed(state: TaskState, status: Status | None = None) -> TaskStateChanged:
    """The event that makes `state` (with `status`, if given) the task's state."""
    state = replace(state, status=status) if status else state
    return TaskStateChanged(
        task=state.task_id,
        status=state.status,
        attempts=state.attempts,
        worker=state.worker,
        reopened=state.reopened,
    )


def after_attempt(
    task: Task, state: TaskState, outcome: AttemptOutcome, *, max_attempts: int
) -> list[FleetEvent]:
    """A candidate goes to the merge queue (verifying); a stop by the person, the cost cap or a budget
    is theirs, not the lead's (escalated, recorded as stopped); the judge's `impossible` goes to the
    lead at once; anything else is a failed attempt."""
    if outcome.candidate is not None:
        return [changed(state, "verifying")]
    if outcome.cause in ("person", "cost_cap", "budget"):
        return [TaskStopped(task=task.id, why=outcome.reason), changed(state, "escalated")]
    if outcome.cause == "impossible":
        return [
            TaskEscalated(task=task.id, why=outcome.reason, decision=IMPOSSIBLE),
            changed(state, "escalated"),
        ]
    return failure(task, state, f"{outcome.status}: {outcome.reason}", max_attempts=max_attempts)


def after_merge(task: Task, state: TaskState, outcome: Outcome, *, max_attempts: int) -> list[FleetEvent]:
    """Merged: done. A conflict or red checks: a failed attempt, with the hunks, or the tests it broke
    (`rejection`) or else the output, as feedback; red only together with other candidates
    (`with_tasks`): escalated at once, naming them."""
    if outcome.kind == "merged":
        return [changed(state, "done")]
    if outcome.kind == "rejected" and outcome.with_tasks:
        return together(task, state, outcome)
    if outcome.kind == "rejected" and outcome.new_failures:
        return failure(task, state, f"rejected: {rejection(outcome)}", max_attempts=max_attempts)
    if outcome.kind in ("conflict", "rejected"):
        why = f"{outcome.kind}: {outcome.hunks or outcome.output}"[:FEEDBACK_CHARS]
        return failure(task, state, why, max_attempts=max_attempts)
    return []  # requeued: it waits for the next batch


def rejection(outcome: Outcome) -> str:
    """What a rejected candidate broke, for the next attempt (and the lead): first the tests failing
    with it that pass on the integration branch without it, as the merge queue compared them, then
    the end of the checks' output (pytest's summary is at its end)."""
    names = outcome.new_failures
    listed = [f"  {name}" for name in names[:NAMED_FAILURES]]
    if len(names) > NAMED_FAILURES:
        listed.append(f"  ... and {len(names) - NAMED_FAILURES} more")
    head = (
        f"with this change the test suite fails {len(names)} test(s) that pass on the integration "
        "branch without it:\n" + "\n".join(listed) + "\nThe end of the checks' output:\n"
    )
    room = max(FEEDBACK_CHARS - len(head), 0)
    return head + (outcome.output[-room:] if room else "")


def together(task: Task, state: TaskState, outcome: Outcome) -> list[FleetEvent]:
    """A candidate that passed the merge checks alone but fails together with `outcome.with_tasks` is not
    blamed alone, so it is not retried as its own failure: the lead decides (each of the pair is
    escalated, or this one naming a partner that landed already). The attempt counts as failed."""
    others = ", ".join(outcome.with_tasks)
    why = (
        f"rejected together with {others}: each passed the merge checks alone on the integration tip, "
        "together they fail (a task already merged stays merged)\n"
        + (rejection(outcome) if outcome.new_failures else outcome.output)
    )[:FEEDBACK_CHARS]
    escalated = replace(state, status="escalated", attempts=state.attempts + 1, worker=None)
    decision = f"fails only together with {others}; the lead decides"
    return [
        changed(state, "failed"),
        TaskEscalated(task=task.id, why=why, decision=decision, with_tasks=list(outcome.with_tasks)),
        changed(escalated),
    ]


def failure(task: Task, state: TaskState, why: str, *, max_attempts: int) -> list[FleetEvent]:
    """A failed attempt: retried within `max_attempts`, else escalated to the lead; `why` is the next
    attempt's feedback."""
    failed = replace(state, status="failed")
    decision = after_failure(task, failed, max_attempts=max_attempts)
    event = TaskRetried if decision.kind == "retry" else TaskEscalated
    return [changed(failed), event(task=task.id, why=why, decision=decision.reason), changed(decision.state)]
