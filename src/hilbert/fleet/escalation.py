"""The lead during a run: it answers escalations with tools, so delegation is a tool call.

When a task cannot be finished within its attempts, the run hands it to the lead: a session of
hilbert's agent loop (agent "lead") whose brief (`escalation_brief`) lists the escalated tasks with
why each failed, and whose tools (`EscalationToolBox`) are read_file / list_files / grep over a
checkout of the integration tip, and:

    reassign {task, note}            reopen it with fresh attempts; the note goes to the next worker
    split_task {task, into: [task]}  add smaller tasks; the task then depends on them and is reopened
    add_task {task}                  add a new task to the plan
    mark_impossible {task, reason}   settle it as impossible (its dependents cannot start)
    message_worker {worker, text}    a message to a running worker, delivered at its next turn
    finish {claim, evidence}

Every tool validates before it changes anything and answers a bad request with a tool error saying
what is wrong (an unknown task, a new plan with a cycle, a task reopened too often), so the lead can
correct itself. The tools change the fleet only through the `Steering` seam, which the run
implements and records as `lead_action` events; this module holds no fleet state of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from hilbert.agent.tools import FINISH, TOOL_SPECS, ToolBox, ToolOutcome
from hilbert.errors import UserError
from hilbert.fleet.lead_tools import TASK_SCHEMA
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.scheduler import TaskState
from hilbert.models.types import ToolCall, ToolSpec
from hilbert.security.policy import check_shell
from hilbert.security.sandbox import Sandbox

READ_TOOLS = ("read_file", "list_files", "grep")
REOPENABLE = frozenset({"escalated", "impossible"})
"""A task the lead may reassign or split: no worker holds it and the scheduler will not retry it."""
UNSTARTED = frozenset({"pending", "escalated", "impossible", "failed"})
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
    _spec(
        "reassign",
        "Reopen an escalated (or impossible) task with fresh attempts; the note (what to do differently) "
        "goes to the next worker.",
        task=_STR,
        note=_STR,
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


class EscalationToolBox:
    """The lead's tools while it answers escalations: read-only file tools over `workspace` (a checkout
    of the integration tip) and the steering tools over `fleet`. A task is reopened (reassigned or
    split) at most `max_reopens` times; after that the lead must mark it impossible."""

    def __init__(
        self,
        workspace: Path,
        fleet: Steering,
        *,
        max_reopens: int = 2,
        env: Mapping[str, str] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self._files = ToolBox(workspace, env=env, sandbox=sandbox, shell_policy=check_shell)
        self.root = self._files.root
        self.fleet, self.max_reopens = fleet, max_reopens
        self.actions = 0
        by_name = {spec.name: spec for spec in TOOL_SPECS}
        self._specs = (*(by_name[n] for n in READ_TOOLS), *ESCALATION_SPECS, by_name[FINISH])
        self._handlers: dict[str, Callable[[dict[str, Any]], str]] = {
            "reassign": self.reassign,
            "split_task": self.split_task,
            "add_task": self.add_task,
            "mark_impossible": self.mark_impossible,
            "message_worker": self.message_worker,
        }

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    async def run(self, call: ToolCall) -> ToolOutcome:
        if call.name in READ_TOOLS:
            return await self._files.run(call)
        handler = self._handlers.get(call.name)
        if handler is None:
            offered = ", ".join(spec.name for spec in self._specs)
            return ToolOutcome(f"unknown tool {call.name!r}; available: {offered}", True)
        if call.raw_arguments is not None or not isinstance(call.arguments, dict):
            return ToolOutcome(f"the arguments of {call.name} are not a JSON object", True)
        try:
            answer = handler(call.arguments)
        except UserError as refused:
            return ToolOutcome(
                f"{call.name}: {refused}" + (f" ({refused.hint})" if refused.hint else ""), True
            )
        self.actions += 1
        return ToolOutcome(answer)

    # -- the steering tools -------------------------------------------------------------------------

    def reassign(self, args: dict[str, Any]) -> str:
        task, state = self._task(args, REOPENABLE, "reassign")
        note = _text(args, "note")
        self._may_reopen(task, state)
        reopened = replace(state, status="pending", attempts=0, worker=None, reopened=state.reopened + 1)
        self.fleet.steer(
            "reassign", {"task": task.id, "note": note}, states={task.id: reopened}, notes={task.id: note}
        )
        return f"{task.id} is reopened with fresh attempts; its next worker gets your note."

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
        self.fleet.steer(
            "split_task",
            {"task": task.id, "into": list(new_ids)},
            plan=plan,
            states=states,
            notes={task.id: note},
        )
        return f"{task.id} now depends on {', '.join(new_ids)}, which are added to the plan."

    def add_task(self, args: dict[str, Any]) -> str:
        task = self._new_task(args.get("task"), "task")
        plan = self._plan([*self.fleet.plan.tasks, task])
        self.fleet.steer("add_task", {"task": task.id}, plan=plan, states={task.id: TaskState(task.id)})
        return f"{task.id} is added to the plan."

    def mark_impossible(self, args: dict[str, Any]) -> str:
        task, state = self._task(args, UNSTARTED, "mark impossible")
        reason = _text(args, "reason")
        settled = replace(state, status="impossible", worker=None)
        self.fleet.steer("mark_impossible", {"task": task.id, "reason": reason}, states={task.id: settled})
        return f"{task.id} is settled as impossible."

    def message_worker(self, args: dict[str, Any]) -> str:
        worker, text = _text(args, "worker"), _text(args, "text")
        name = self.fleet.message_worker(worker, text)
        return f"sent to {name}; it reads it before its next step."

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


def _text(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"`{key}` must be a non-empty string", hint=f"pass {key}")
    return value.strip()


def escalation_brief(
    plan: Plan,
    states: Mapping[str, TaskState],
    escalated: list[str],
    why: Mapping[str, str],
    *,
    running: Mapping[str, str] = {},
    max_chars: int = 3000,
) -> str:
    """The lead's task for one session: the goal, where every task stands, and each escalated task
    with the reason its last attempt did not land (cut to `max_chars`)."""
    tasks = {task.id: task for task in plan.tasks}
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state.status] = counts.get(state.status, 0) + 1
    lines = [
        f"You are the lead of this run. Goal: {plan.goal}",
        "",
        "Tasks were escalated to you: their workers could not finish them within their attempts. "
        "Answer each one with a tool: reassign it (with a note saying what to do differently), "
        "split_task, add_task, mark_impossible, or message_worker. Read the code first if that helps. "
        "Finish when each escalated task is answered.",
        "",
        "Where the plan stands: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())),
    ]
    if running:
        lines.append("Running now: " + ", ".join(f"{task} ({worker})" for task, worker in running.items()))
    for task_id in escalated:
        task, state = tasks[task_id], states[task_id]
        reason = why.get(task_id, "(no reason recorded)")
        if len(reason) > max_chars:
            reason = reason[:max_chars] + f"\n… [{len(reason) - max_chars} more chars]"
        lines += [
            "",
            f"## {task.id} — {task.title}",
            f"verify: `{task.verify}`",
            f"claims: {', '.join(task.claims) or '(none)'}",
            f"attempts: {state.attempts} (reopened before: {state.reopened})",
            "why the last attempt did not land:",
            "```text",
            reason.replace("```", "'''"),
            "```",
        ]
    return "\n".join(lines)
