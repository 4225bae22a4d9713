"""What the lead may change in a running fleet, and the tools it changes it with.

The `Steering` seam is the fleet as the lead's tools see it: its plan, task states, the tasks the
person stopped; `steer` applies a change (a new plan, new task states, notes for the next workers)
and records it as a `lead_action`; `propose` holds one for the person instead; `message_worker`
writes to a running worker. `SteeringTools` are the tools over it:

    reassign {task, note?}           reopen it with fresh attempts; the note goes to the next worker
    split_task {task, into: [task]}  add smaller tasks; the task then depends on them and is reopened
    add_task {task}                  add a new task to the plan
    mark_impossible {task, reason}   settle it as impossible (its dependents cannot start)
    message_worker {worker, text}    a message to a running worker, delivered at its next turn
    decide_candidate {proposal, approve, why}  merge a held candidate, or send its task back

Every tool validates before it changes anything and raises a `UserError` saying what is wrong (an
unknown task, a new plan with a cycle, a task reopened too often), so the lead can correct itself.
Authority (`hilbert.fleet.proposals`): after its session read a worker's message, a widening action
(add_task, split_task, a reassign with a note) is held for the person (`propose`) and the tool says
so. The run applies a proposal the person approved with the same tools, validated against the fleet
as it is then. This module holds no fleet state of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Any, Protocol

from pydantic import ValidationError

from hilbert.errors import UserError
from hilbert.fleet.lead_tools import TASK_SCHEMA
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.proposals import WorkerMessage
from hilbert.fleet.scheduler import TaskState
from hilbert.models.types import ToolSpec

REOPENABLE = frozenset({"escalated", "impossible", "needs_you"})
"""A task the lead may reassign or split: no worker holds it and the scheduler will not retry it."""
UNSTARTED = frozenset({"pending", "escalated", "impossible", "failed", "needs_you"})
"""A task the lead may mark impossible: no worker holds it and it is not done."""

_STR = {"type": "string"}


def _spec(name: str, description: str, **properties: Any) -> ToolSpec:
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return ToolSpec(name, description, schema)


ESCALATION_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "reassign",
        "Reopen an escalated (or impossible) task with fresh attempts; the note, if any (what to do "
        "differently), goes to the next worker.",
        {
            "type": "object",
            "properties": {"task": _STR, "note": _STR},
            "required": ["task"],
            "additionalProperties": False,
        },
    ),
    _spec(
        "split_task",
        "Split a task: the new tasks are added to the plan, and the task then depends on them and is "
        "reopened (its own check runs once they are merged). New ids must be unused.",
        task=_STR,
        into={"type": "array", "items": TASK_SCHEMA, "minItems": 1},
    ),
    _spec(
        "add_task", "Add a new task to the plan (it starts when its dependencies are done).", task=TASK_SCHEMA
    ),
    _spec(
        "mark_impossible",
        "Settle a task that cannot be done as impossible, with the reason "
        "(tasks depending on it will not run).",
        task=_STR,
        reason=_STR,
    ),
    _spec(
        "message_worker",
        "Send a message to a running worker by name; it reads it before its next step.",
        worker=_STR,
        text=_STR,
    ),
    ToolSpec(
        "decide_candidate",
        "Decide a candidate held for you (a worker's change that passed the gate after the worker read a "
        "peer's message): approve it to merge it, or reject it saying why (the task is sent back).",
        {
            "type": "object",
            "properties": {"proposal": _STR, "approve": {"type": "boolean"}, "why": _STR},
            "required": ["proposal", "approve"],
            "additionalProperties": False,
        },
    ),
)


class Steering(Protocol):
    """What the lead may change in a running fleet. `steer` applies a new plan and new task states
    (each validated by the caller) with the notes for the tasks' next workers, and records `action`."""

    @property
    def plan(self) -> Plan: ...

    @property
    def states(self) -> Mapping[str, TaskState]: ...

    @property
    def stopped(self) -> AbstractSet[str]:
        """Tasks the person (or the cost cap) stopped: the lead may not reopen them."""
        ...

    def steer(
        self,
        action: str,
        detail: dict[str, Any],
        *,
        plan: Plan | None = None,
        states: Mapping[str, TaskState] = {},
        notes: Mapping[str, str] = {},
    ) -> None: ...

    def message_worker(self, worker: str, text: str) -> str:
        """Deliver `text` to the running worker `worker` names; its display name. Raises `UserError`."""
        ...

    def propose(
        self,
        action: str,
        detail: dict[str, Any],
        arguments: Mapping[str, Any],
        *,
        read: Sequence[WorkerMessage],
        plan: Plan | None = None,
        notes: Mapping[str, str] = {},
    ) -> str:
        """Hold a widening action (what `steer` would get) for the person; the proposal's id."""
        ...

    def decide_candidate(
        self, proposal: str, *, approve: bool, why: str, read: Sequence[WorkerMessage] = ()
    ) -> str:
        """Approve or reject a held candidate (`hilbert.fleet.tainted`); what became of it (`read`: the
        workers' messages the session read). Raises `UserError` when no candidate of that id waits for
        a decision."""
        ...


class SteeringTools:
    """The steering tools over `fleet`; `call(name, arguments)` answers in words or raises `UserError`.
    A task is reopened (reassigned or split) at most `max_reopens` times; after that the lead must mark
    it impossible. When `read()` names worker messages the session was shown, every action records
    them, and with `hold_widening` a widening one is held for the person (`Steering.propose`).
    `approved` names the proposal being applied, which the person approved (recorded with it)."""

    def __init__(
        self,
        fleet: Steering,
        *,
        max_reopens: int = 2,
        read: Callable[[], Sequence[WorkerMessage]] = tuple,
        hold_widening: bool = True,
        approved: str | None = None,
    ) -> None:
        self.fleet, self.max_reopens, self.read = fleet, max_reopens, read
        self.hold_widening, self.approved = hold_widening, approved
        self.tools: dict[str, Callable[[dict[str, Any]], str]] = {
            "reassign": self.reassign,
            "split_task": self.split_task,
            "add_task": self.add_task,
            "mark_impossible": self.mark_impossible,
            "message_worker": self.message_worker,
            "decide_candidate": self.decide_candidate,
        }

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        return self.tools[name](arguments)

    def reassign(self, args: dict[str, Any]) -> str:
        task, state = self._task(args, REOPENABLE, "reassign")
        note = _text(args, "note", optional=True)
        self._may_reopen(task, state)
        reopened = replace(state, status="pending", attempts=0, worker=None, reopened=state.reopened + 1)
        held = self._apply(
            "reassign",
            {"task": task.id, **({"note": note} if note else {})},
            args,
            widening=bool(note),  # a note can carry new instructions
            states={task.id: reopened},
            notes={task.id: note} if note else {},
        )
        gets = "gets your note" if note else "starts afresh"
        return held or f"{task.id} is reopened with fresh attempts; its next worker {gets}."

    def split_task(self, args: dict[str, Any]) -> str:
        task, state = self._task(args, REOPENABLE | {"pending"}, "split")
        into = args.get("into")
        if not isinstance(into, list) or not into:
            raise UserError("`into` must be a non-empty list of tasks", hint="each as in add_task")
        self._may_reopen(task, state)
        parts = [self._new_task(part, f"into[{i}]") for i, part in enumerate(into)]
        new_ids = tuple(part.id for part in parts)
        whole = task.model_copy(update={"depends_on": (*task.depends_on, *new_ids)})
        tasks: list[Task] = []
        for existing in self.fleet.plan.tasks:
            tasks += [*parts, whole] if existing.id == task.id else [existing]
        plan = self._plan(tasks)
        reopened = replace(state, status="pending", attempts=0, worker=None, reopened=state.reopened + 1)
        # a part counts as reopened as often as its whole, so splitting cannot go on for ever
        states = {
            task.id: reopened,
            **{part.id: TaskState(part.id, reopened=reopened.reopened) for part in parts},
        }
        note = f"The lead split this task: {', '.join(new_ids)} (merged first) do parts of it."
        held = self._apply(
            "split_task",
            {"task": task.id, "into": list(new_ids)},
            args,
            widening=True,
            plan=plan,
            states=states,
            notes={task.id: note},
        )
        return held or f"{task.id} now depends on {', '.join(new_ids)}, which are added to the plan."

    def add_task(self, args: dict[str, Any]) -> str:
        task = self._new_task(args.get("task"), "task")
        plan = self._plan([*self.fleet.plan.tasks, task])
        states = {task.id: TaskState(task.id)}
        held = self._apply("add_task", {"task": task.id}, args, widening=True, plan=plan, states=states)
        return held or f"{task.id} is added to the plan."

    def mark_impossible(self, args: dict[str, Any]) -> str:
        task, state = self._task(args, UNSTARTED, "mark impossible")
        reason = _text(args, "reason")
        settled = replace(state, status="impossible", worker=None)
        detail = {"task": task.id, "reason": reason}
        self._apply("mark_impossible", detail, args, widening=False, states={task.id: settled})
        return f"{task.id} is settled as impossible."

    def message_worker(self, args: dict[str, Any]) -> str:
        worker, text = _text(args, "worker"), _text(args, "text")
        name = self.fleet.message_worker(worker, text)
        return f"sent to {name}; it reads it before its next step."

    def decide_candidate(self, args: dict[str, Any]) -> str:
        approve = args.get("approve")
        if not isinstance(approve, bool):
            raise UserError("decide_candidate: `approve` must be true or false", hint="true merges it")
        why = str(args.get("why") or "").strip()
        if not approve and not why:
            raise UserError("decide_candidate: a rejection needs `why`", hint="its next worker reads it")
        proposal = _text(args, "proposal")
        return self.fleet.decide_candidate(proposal, approve=approve, why=why, read=tuple(self.read()))

    def _apply(
        self,
        action: str,
        detail: dict[str, Any],
        arguments: Mapping[str, Any],
        *,
        widening: bool,
        plan: Plan | None = None,
        states: Mapping[str, TaskState] = {},
        notes: Mapping[str, str] = {},
    ) -> str | None:
        """Steer the fleet, or hold a widening action for the person: then the answer for the lead."""
        read = tuple(self.read())
        if widening and read and self.hold_widening:
            proposal = self.fleet.propose(action, detail, arguments, read=read, plan=plan, notes=notes)
            senders = ", ".join(dict.fromkeys(message.sender for message in read))
            return (
                f"{action} is not applied: it is held for the person's approval as {proposal}. This "
                f"session read a message from a worker ({senders}), and only the person may widen work "
                f"that a worker may have asked for. The person approves it with `hilbert approve "
                f"{proposal}` (the run then applies it) or rejects it with `hilbert reject {proposal}`. "
                "Nothing more is needed from you for it; carry on with the rest."
            )
        if read:
            detail = {**detail, "worker_messages_read": [message.to_json() for message in read]}
        if self.approved:
            detail = {**detail, "proposal": self.approved, "approved_by": "person"}
        self.fleet.steer(action, detail, plan=plan, states=states, notes=notes)
        return None

    # -- checks -------------------------------------------------------------------------------------

    def _task(self, args: dict[str, Any], allowed: frozenset[str], verb: str) -> tuple[Task, TaskState]:
        task_id = _text(args, "task")
        task = next((t for t in self.fleet.plan.tasks if t.id == task_id), None)
        if task is None:
            known = ", ".join(t.id for t in self.fleet.plan.tasks)
            raise UserError(f"there is no task {task_id!r}", hint=f"tasks: {known}")
        state = self.fleet.states[task_id]
        if state.status not in allowed:
            raise UserError(
                f"cannot {verb} {task_id} while it is {state.status}",
                hint=f"only a task that is {' or '.join(sorted(allowed))}",
            )
        return task, state

    def _may_reopen(self, task: Task, state: TaskState) -> None:
        if task.id in self.fleet.stopped:
            raise UserError(
                f"{task.id} was stopped by the person (or the run's cost cap), not by a failure",
                hint="only the person restarts it; leave it, or mark it impossible",
            )
        if state.reopened >= self.max_reopens:
            raise UserError(
                f"{task.id} was reopened {state.reopened} times already and still did not land",
                hint="split it into smaller tasks only if that is new information; else mark it impossible",
            )

    def _new_task(self, raw: object, where: str) -> Task:
        if not isinstance(raw, dict):
            raise UserError(f"{where} is not a task object", hint="give id, title, description, verify")
        try:
            task = Task.model_validate(raw)
        except ValidationError as err:
            raise UserError(_errors(err, where), hint="fix those fields and call again") from None
        if any(t.id == task.id for t in self.fleet.plan.tasks):
            raise UserError(f"{where}: the id {task.id!r} is already in the plan", hint="choose an unused id")
        return task

    def _plan(self, tasks: list[Task]) -> Plan:
        try:
            return Plan(goal=self.fleet.plan.goal, tasks=tuple(tasks))
        except ValidationError as err:
            raise UserError(_errors(err, "plan"), hint="nothing was changed") from None


def _errors(err: ValidationError, where: str) -> str:
    """One line per problem, each naming its field: `into[0].verify: Field required`."""
    problems = []
    for error in err.errors():
        field = ".".join([where, *map(str, error["loc"])])
        problems.append(f"{field}: {str(error['msg']).removeprefix('Value error, ')}")
    return "; ".join(problems)


def _text(args: Mapping[str, Any], key: str, *, optional: bool = False) -> str:
    value = args.get(key)
    if optional and value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        hint = f"pass {key}" + (", or leave it out" if optional else "")
        raise UserError(f"`{key}` must be a non-empty string", hint=hint)
    return value.strip()
