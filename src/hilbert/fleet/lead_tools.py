"""The lead's planning tools: look at the repository, write the plan, finish.

`PlanningToolBox(workspace, plan_path)` offers read_file, list_files, grep and shell from hilbert's
`ToolBox` (composed, not subclassed: write_file and edit_file are not offered and are refused), plus
`write_plan {goal, tasks: [{id, title, description, verify, depends_on?, claims?, budget?,
allow_shared_claims?}]}` and `finish` (which the agent loop handles). It has ToolBox's interface
(`root`, `specs()`, `async run(call) -> ToolOutcome`), so `hilbert.agent.loop.run_agent` drives it.

`write_plan` validates by building a `Plan`; a bad plan (a task without verify, an unknown
dependency, a cycle, ...) comes back as a tool error naming what is wrong, so the lead can fix it.
A good one is written as PLAN.md to `plan_path`, which must lie outside the workspace (the lead's
shell could otherwise change it after the fact, and workers must not see a half-written plan).

The shell is offered so the lead can run the test suite. It goes through the run's `Runner` (sandboxed,
the command policy first) with the workspace the one writable folder: `hilbert plan` gives the lead a
disposable checkout of the commit the run will start from, never the person's repository, so what its
commands write is thrown away with the checkout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hilbert.agent.tools import FINISH, TOOL_SPECS, ToolBox, ToolOutcome
from hilbert.commands import Runner
from hilbert.errors import UserError
from hilbert.fleet.plan import Plan, parse_plan, write_plan
from hilbert.models.types import ToolCall, ToolSpec

WRITE_PLAN = "write_plan"
READ_TOOLS = ("read_file", "list_files", "grep", "shell")

_STR = {"type": "string"}
_STRINGS = {"type": "array", "items": _STR}
TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "a short ASCII id such as T3"},
        "title": {"type": "string", "description": "one line"},
        "description": {"type": "string", "description": "what to do and why, for the worker"},
        "verify": {"type": "string", "description": "the shell command whose success proves it done"},
        "depends_on": {**_STRINGS, "description": "ids of tasks that must be merged first"},
        "claims": {**_STRINGS, "description": "files or folders (relative) the task expects to change"},
        "budget": {
            "type": "object",
            "properties": {"turns": {"type": "integer"}, "usd": {"type": "number"}},
            "additionalProperties": False,
        },
        "allow_shared_claims": {"type": "boolean"},
    },
    "required": ["id", "title", "description", "verify"],
    "additionalProperties": False,
}
WRITE_PLAN_SPEC = ToolSpec(
    WRITE_PLAN,
    "Write the plan (PLAN.md): the goal and verifiable tasks. A bad plan comes back as an error "
    "saying what is wrong; fix it and call write_plan again. Calling it again replaces the plan.",
    {
        "type": "object",
        "properties": {"goal": _STR, "tasks": {"type": "array", "items": TASK_SCHEMA}},
        "required": ["goal", "tasks"],
        "additionalProperties": False,
    },
)


class PlanningToolBox:
    """The lead's tools while planning, bound to the repository `workspace`; the plan goes to
    `plan_path` (outside the workspace). `plan` is the last plan written, or None."""

    def __init__(
        self,
        workspace: Path,
        plan_path: Path,
        *,
        runner: Runner,
        max_output_chars: int = 12_000,
    ) -> None:
        self._tools = ToolBox(workspace, runner=runner, max_output_chars=max_output_chars)
        self.root = self._tools.root
        self.plan_path = Path(plan_path).resolve()
        if self.plan_path.is_relative_to(self.root):
            raise UserError(
                f"the plan path {plan_path} lies inside the workspace {self.root}",
                hint="write PLAN.md outside the repository the lead explores (e.g. in the run's folder)",
            )
        self.plan: Plan | None = None
        by_name = {spec.name: spec for spec in TOOL_SPECS}
        self._specs = (*(by_name[name] for name in READ_TOOLS), WRITE_PLAN_SPEC, by_name[FINISH])

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    async def run(self, call: ToolCall) -> ToolOutcome:
        if call.name == WRITE_PLAN:
            return self.write_plan(call)
        if call.name not in READ_TOOLS:
            offered = ", ".join(spec.name for spec in self._specs)
            return ToolOutcome(f"unknown tool {call.name!r} while planning; available: {offered}", True)
        return await self._tools.run(call)

    def write_plan(self, call: ToolCall) -> ToolOutcome:
        """Validate the plan in `call`'s arguments and write it; a tool error says what is wrong."""
        if call.raw_arguments is not None or not isinstance(call.arguments, dict):
            return ToolOutcome("write_plan: the arguments are not a JSON object {goal, tasks}", True)
        try:
            plan = Plan.model_validate(call.arguments)
        except ValidationError as err:
            return ToolOutcome(_describe(err, call.arguments), True)
        text = write_plan(plan)
        try:  # write → parse must round-trip; if not, the plan cannot be handed to anyone
            parse_plan(text, source=self.plan_path.name)
        except UserError as err:
            return ToolOutcome(f"write_plan: the plan does not read back: {err}", True)
        self.plan_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.plan_path.with_name(f".{self.plan_path.name}.{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(self.plan_path)
        self.plan = plan
        count = len(plan.tasks)
        ids = ", ".join(task.id for task in plan.tasks)
        return ToolOutcome(f"wrote {self.plan_path.name} with {count} task{'s' * (count != 1)} ({ids})")


def _describe(err: ValidationError, arguments: Mapping[str, Any]) -> str:
    """One line per problem, each naming where it is: `tasks[1] (T2).verify: Field required`."""
    tasks = arguments.get("tasks")
    lines = []
    for error in err.errors():
        loc = list(error["loc"])
        where = ""
        if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
            task = tasks[loc[1]] if isinstance(tasks, list) and loc[1] < len(tasks) else None
            task_id = task.get("id") if isinstance(task, dict) else None
            where = f"tasks[{loc[1]}]" + (f" ({task_id})" if isinstance(task_id, str) else "")
            loc = loc[2:]
        where = ".".join([where, *map(str, loc)] if where else map(str, loc)) or "plan"
        message = str(error["msg"]).removeprefix("Value error, ")
        lines.append(f"{where}: {message}")
    return "write_plan: the plan is not valid, nothing was written:\n" + "\n".join(
        f"- {line}" for line in lines
    )
