"""Escalations that end: which escalated tasks no lead will answer, so they go to the person.

An escalated task waits for the lead. It *needs you* (status `needs_you`, event `task_needs_you` with
why and the evidence of its last attempt) when no lead will ever answer it:

- the run has no lead, or the person stopped the lead, or the lead has no sessions left;
- the lead runs on the workers' model: the model that already failed at the task;
- a lead session was shown it and answered without acting on it: the lead gave up;
- it was stopped (by the person, or by the run's cost cap): it waits for the person anyway.

`hilbert retry RUN TASK [--edit]` answers it: a `task_retry_asked` from the person, folded into the
task's state (pending, fresh attempts; with `--edit` the task as the person changed it), which the
live run picks up, or `hilbert retry` resumes the run that had ended. `needs_you` is pure: the driver
records what it returns.
"""

from __future__ import annotations

from hilbert.fleet.events import FleetEvent, TaskNeedsYou, TaskStateChanged
from hilbert.fleet.final_check import GIVEN_UP
from hilbert.fleet.inbox import EVERYONE, LEAD
from hilbert.fleet.state import FleetState


def needs_you(
    state: FleetState, *, lead: bool, same_model: bool, sessions_left: bool, stopping: bool = False
) -> list[FleetEvent]:
    """The events that hand every escalated task no lead will answer to the person. `lead`: the run
    has a lead model; `same_model`: it is the workers'; `sessions_left`: the lead may start another;
    `stopping`: the run stops (the person's stop, the cost cap), so no lead starts."""
    stopped_lead = bool(state.stops & {LEAD, EVERYONE})
    asked = set(state.lead_open or ()) if not stopped_lead else set()  # a session works on these now
    nobody = (
        "the run has no lead model"
        if not lead
        else "the lead runs on the workers' model, which already failed at it"
        if same_model
        else "the lead was stopped"
        if stopped_lead
        else "the run is stopping (stopped, or its cost cap is spent)"
        if stopping
        else "the lead has no sessions left"
        if not sessions_left
        else ""
    )
    answer = state.lead_answer
    gave_up = (
        f"the lead's session failed ({answer.error})"
        if answer is not None and answer.error
        else "the lead was asked and left it escalated"
    )
    events: list[FleetEvent] = []
    for task_id, task_state in state.states.items():
        if task_state.status != "escalated" or task_id in asked:
            continue
        if task_id in state.stopped:
            why = "it was stopped"
        elif task_id in state.shown:
            why = gave_up
        elif nobody:
            why = nobody
        else:
            continue  # the lead will be asked
        events += [
            TaskNeedsYou(task=task_id, why=why, evidence=state.feedback.get(task_id, "")),
            TaskStateChanged(
                task=task_id,
                status="needs_you",
                attempts=task_state.attempts,
                worker=None,
                reopened=task_state.reopened,
            ),
        ]
    return events


def retry_line(run: str, task: str) -> str:
    return f"hilbert retry {run} {task}  (--edit to change the task first)"


def summary(state: FleetState) -> list[str]:
    """For the run's last lines: each task that needs the person (or that the lead marked impossible),
    why, the evidence of its last attempt, and the command that reopens it; not one whose check the
    final check found passing at the tip (`fixed_meanwhile`)."""
    lines = []
    passing = fixed_tasks(state)
    for task_id, task_state in state.states.items():
        if task_state.status not in ("needs_you", "impossible"):
            continue
        if task_id in passing:
            continue
        handed = state.needs_you.get(task_id)
        why = handed.why if handed else "the lead marked it impossible"
        evidence = (handed.evidence if handed else "") or state.feedback.get(task_id, "")
        lines.append(f"  {task_id} needs you: {why}")
        first = next((line.strip() for line in evidence.splitlines() if line.strip()), "")
        if first:
            lines.append(f"    its last attempt: {first[:200]}")
        lines.append(f"    {retry_line(state.run, task_id)}")
    return lines


def fixed_tasks(state: FleetState) -> list[str]:
    """The tasks given up (needing the person, marked impossible, or waiting on such a task when the
    run ended: `GIVEN_UP`) whose check the last final check found passing at the tip and failing at
    base: another task's merge fixed them."""
    check = state.final_checks[-1] if state.final_checks else None
    passing = check.passing if check else []
    return [t for t in passing if t in state.states and state.states[t].status in GIVEN_UP]


def fixed_meanwhile(state: FleetState) -> list[str]:
    """For the run's last lines: the tasks `fixed_tasks` finds, with nothing to retry."""
    tasks = fixed_tasks(state)
    if not tasks:
        return []
    tip = state.final_checks[-1].tip[:12]
    return [
        f"given up, yet their checks pass at {tip} (another task's merge fixed them; nothing to retry): "
        + ", ".join(tasks)
    ]
