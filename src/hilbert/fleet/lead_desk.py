"""The fleet's lead-facing half: when the lead may act, its sessions on escalated tasks, and the
`Steering` seam its tools act through (`hilbert.fleet.escalation`).

`LeadDesk` is a base of the fleet's runtime (`hilbert.fleet.run._Fleet`), which owns the state these
methods read and change (declared below); it keeps the lead's side of the run in one place, apart from
scheduling, workers and the merge queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import AgentResult, CostPool, SharedCostLimit, TurnLimit
from hilbert.errors import UserError
from hilbert.fleet.escalation import EscalationToolBox, escalation_brief
from hilbert.fleet.inbox import LEAD, Inbox, send, stop_requested
from hilbert.fleet.names import Name, lookup
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.fleet.scheduler import TaskState
from hilbert.models.types import Model
from hilbert.security.envelope import MessageKey
from hilbert.security.sandbox import Sandbox
from hilbert.store import EventStore
from hilbert.workspaces import Git, Workspaces

if TYPE_CHECKING:
    from hilbert.fleet.run import FleetConfig

INTEGRATION = "hilbert/integration"


class LeadDesk:
    # the fleet's state these methods use (set by `_Fleet.__init__` and `go`)
    plan: Plan
    tasks: dict[str, Task]
    states: dict[str, TaskState]
    config: FleetConfig
    lead_model: Model | None
    store: EventStore
    run: str
    root: Path
    git: Git
    integration: Path
    workspaces: Workspaces
    workers: dict[str, Name]
    feedback: dict[str, str]
    notes: dict[str, list[str]]
    answered: set[str]
    stopped: set[str]
    lead_sessions: int
    lead_inbox: Inbox
    key: MessageKey
    sandbox: Sandbox | None
    cost: CostPool
    env: Mapping[str, str] | None
    woken: asyncio.Event
    record: Callable[[str, dict[str, Any]], None]  # the fleet's: append a harness event
    set_state: Callable[..., None]  # the fleet's: change a task's state and record it

    def lead_may_act(self, stopping: bool) -> bool:
        """A lead is configured, the run is not stopping, nobody stopped the lead, sessions are left."""
        return (
            self.lead_model is not None
            and not stopping
            and not stop_requested(self.store, self.run, LEAD)
            and self.lead_sessions < self.config.lead_sessions
        )

    async def consult_lead(self, escalated: list[str]) -> AgentResult:
        """One session of the lead on `escalated`, with read tools over a checkout of the integration tip."""
        assert self.lead_model is not None
        self.answered.update(escalated)
        self.lead_sessions += 1
        self.record("lead_consulted", {"tasks": escalated, "session": self.lead_sessions})
        tip = (await self.git.run("-C", self.integration, "rev-parse", INTEGRATION)).stdout.strip()
        checkout = await self.workspaces.provision(f"lead-{self.lead_sessions}", tip)
        running = {task: name.display for task, name in self.workers.items()}
        brief = escalation_brief(self.plan, self.states, escalated, self.feedback, running=running)
        tools = EscalationToolBox(
            checkout.work_tree, self, max_reopens=self.config.max_reopens, env=self.env, sandbox=self.sandbox
        )
        spend = SharedCostLimit(self.cost)
        try:
            result = await run_agent(
                run=self.run,
                agent=LEAD,
                task=brief,
                model=self.lead_model,
                toolbox=tools,
                store=self.store,
                policies=[TurnLimit(self.config.lead_turns), spend, self.lead_inbox],
            )
            spend.settle(result.cost_usd)
        finally:
            kept = await asyncio.shield(
                self.workspaces.archive_or_remove(checkout, self.integration, f"refs/heads/{INTEGRATION}")
            )
            self.record("workspace_closed", {"worker": checkout.worker_id, "message": kept})
        return result

    def consulted(self, finished: asyncio.Task[AgentResult]) -> None:
        error = finished.exception()
        unanswered = [
            t
            for t, s in self.states.items()
            if s.status == "escalated" and t in self.answered and t not in self.stopped
        ]
        self.record(
            "lead_answered",
            {
                "status": "error" if error else finished.result().status,
                "error": f"{type(error).__name__}: {error}" if error else None,
                "still_escalated": unanswered,
            },
        )

    def steer(
        self,
        action: str,
        detail: dict[str, Any],
        *,
        plan: Plan | None = None,
        states: Mapping[str, TaskState] = {},
        notes: Mapping[str, str] = {},
    ) -> None:
        """Apply what the lead decided (already validated by its tools) and record it."""
        if plan is not None:  # first what can fail, so that a failure changes nothing
            partial = self.root / ".PLAN.md.partial"
            partial.write_text(write_plan(plan))
            partial.replace(self.root / "PLAN.md")
        self.record("lead_action", {"action": action, **detail})
        if plan is not None:
            added = [t for t in plan.tasks if t.id not in self.tasks]
            self.plan, self.tasks = plan, {task.id: task for task in plan.tasks}
            self.record(
                "plan_changed",
                {
                    "tasks": [t.id for t in plan.tasks],
                    "added": [t.model_dump(mode="json") for t in added],
                    "plan": str(self.root / "PLAN.md"),
                },
            )
        for task_id, note in notes.items():
            self.notes.setdefault(task_id, []).append(note)
        for task_id, state in states.items():
            self.states[task_id] = state
            self.answered.discard(task_id)  # if it is escalated again, the lead hears of it again
            self.set_state(task_id)
        self.woken.set()

    def message_worker(self, worker: str, text: str) -> str:
        name = lookup(worker, self.workers.values())
        if name is None:
            running = ", ".join(n.display for n in self.workers.values()) or "none"
            raise UserError(f"no running worker is called {worker!r}", hint=f"running now: {running}")
        send(self.store, self.run, name.display, text, sender=LEAD, key=self.key)
        return name.display
