"""The fleet's lead-facing half: when the lead may act, its sessions on escalated tasks, the
`Steering` seam its tools act through (`hilbert.fleet.steering`), and the proposals a session held
for the person, applied once the person approves them (`hilbert.fleet.proposals`).

`LeadDesk` is a base of the fleet's runtime (`hilbert.fleet.run._Fleet`), which owns the state these
methods read and change (declared below); it keeps the lead's side of the run in one place, apart from
scheduling, workers and the merge queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import AgentResult, CostPool, SharedCostLimit, TurnLimit
from hilbert.commands import Runner
from hilbert.errors import UserError
from hilbert.fleet.escalation import EscalationToolBox, escalation_brief
from hilbert.fleet.inbox import HARNESS, LEAD, PERSON, Inbox, send, stop_requested
from hilbert.fleet.names import Name, lookup
from hilbert.fleet.plan import Plan, Task, write_plan
from hilbert.fleet.proposals import (
    PROPOSAL_APPLIED,
    PROPOSAL_APPROVED,
    PROPOSAL_HELD,
    PROPOSAL_REJECTED,
    PROPOSAL_STALE,
    Proposal,
    ReadWorkerMessages,
    WorkerMessage,
    proposals,
)
from hilbert.fleet.scheduler import TaskState
from hilbert.fleet.steering import SteeringTools
from hilbert.models.types import Model
from hilbert.security.envelope import MessageKey
from hilbert.settings import Settings
from hilbert.store import EventStore
from hilbert.workspaces import Git, Workspaces
from hilbert.workspaces.integration import Integration

DECISIONS_POLL_S = 1.0  # how often the run looks for the person's decisions on held proposals


class LeadDesk:
    # the fleet's state these methods use (set by `_Fleet.__init__` and `go`)
    plan: Plan
    tasks: dict[str, Task]
    states: dict[str, TaskState]
    settings: Settings
    lead_model: Model | None
    store: EventStore
    run: str
    root: Path
    git: Git
    integration: Integration
    workspaces: Workspaces
    workers: dict[str, Name]
    feedback: dict[str, str]
    notes: dict[str, list[str]]
    answered: set[str]
    stopped: set[str]
    lead_sessions: int
    lead_inbox: Inbox
    key: MessageKey
    runner: Runner
    cost: CostPool
    woken: asyncio.Event
    record: Callable[[str, dict[str, Any]], None]  # the fleet's: append a harness event
    set_state: Callable[..., None]  # the fleet's: change a task's state and record it

    def lead_may_act(self, stopping: bool) -> bool:
        """A lead is configured, the run is not stopping, nobody stopped the lead, sessions are left."""
        return (
            self.lead_model is not None
            and not stopping
            and not stop_requested(self.store, self.run, LEAD)
            and self.lead_sessions < self.settings.fleet.lead_sessions
        )

    async def consult_lead(self, escalated: list[str]) -> AgentResult:
        """One session of the lead on `escalated`, with read tools over a checkout of the integration tip."""
        assert self.lead_model is not None
        self.answered.update(escalated)
        self.lead_sessions += 1
        self.record("lead_consulted", {"tasks": escalated, "session": self.lead_sessions})
        tip = await self.integration.tip()
        checkout = await self.workspaces.provision(f"lead-{self.lead_sessions}", tip)
        running = {task: name.display for task, name in self.workers.items()}
        brief = escalation_brief(self.plan, self.states, escalated, self.feedback, running=running)
        inbox = ReadWorkerMessages(self.lead_inbox)  # what this session was shown of workers' messages
        tools = EscalationToolBox(
            checkout.work_tree,
            self,
            runner=self.runner,
            max_reopens=self.settings.fleet.max_reopens,
            read=lambda: inbox.read,
            hold_widening=self.settings.fleet.approve_worker_proposals,
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
                policies=[TurnLimit(self.settings.fleet.lead_turns), spend, inbox],
            )
            spend.settle(result.cost_usd)
        finally:
            kept = await asyncio.shield(self.workspaces.archive_or_remove(checkout, self.integration))
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
        """Hold what the lead decided for the person's approval; the proposal's id (P1, P2, ...)."""
        held = self.store.events(run=self.run, agent=HARNESS, kinds=[PROPOSAL_HELD])
        proposal = f"P{len(held) + 1}"
        added = [t.model_dump(mode="json") for t in plan.tasks if t.id not in self.tasks] if plan else []
        self.record(
            PROPOSAL_HELD,
            {
                "id": proposal,
                "action": action,
                "detail": detail,
                "arguments": dict(arguments),
                "added": added,
                "notes": dict(notes),
                "worker_messages": [message.to_json() for message in read],
                "session": self.lead_sessions,
            },
        )
        return proposal

    async def watch_proposals(self, every_s: float = DECISIONS_POLL_S) -> None:
        """Every `every_s`, carry out the person's new decisions on held proposals. Runs until cancelled."""
        seen = 0
        while True:
            for event in self.store.events(
                run=self.run, agent=PERSON, kinds=[PROPOSAL_APPROVED, PROPOSAL_REJECTED], after_id=seen
            ):
                seen = event.id
                proposal = next(
                    (p for p in proposals(self.store, self.run) if p.decided_by == event.id), None
                )
                if proposal is None:  # not the first decision on it, or no such proposal
                    continue
                try:
                    self.decided(proposal)
                except Exception as error:  # a harness step failed (the disk): say so, keep watching
                    why = f"the harness failed to apply it: {type(error).__name__}: {error}"
                    self.record(PROPOSAL_STALE, {"id": proposal.id, "why": why})
            await asyncio.sleep(every_s)

    def decided(self, proposal: Proposal) -> None:
        """Apply a proposal the person approved, as the lead's tool would now (or record why it no
        longer applies); tell the lead either way."""
        what = f"{proposal.id} ({proposal.what()})"
        if proposal.status == "rejected":
            why = f": {proposal.why}" if proposal.why else ""
            self.tell_lead(f"The person rejected {what}{why}. It is not applied.")
            return
        if proposal.status != "approved":
            return
        tools = SteeringTools(self, max_reopens=self.settings.fleet.max_reopens, approved=proposal.id)
        try:
            tools.call(proposal.action, dict(proposal.arguments))
        except UserError as refused:
            why = str(refused)  # with its hint
            self.record(PROPOSAL_STALE, {"id": proposal.id, "why": why})
            self.tell_lead(f"The person approved {what}, but it no longer applies: {why}.")
            return
        self.record(PROPOSAL_APPLIED, {"id": proposal.id, "action": proposal.action})
        self.tell_lead(f"The person approved {what}; it is applied. Nothing more is needed from you for it.")

    def tell_lead(self, text: str) -> None:
        """A note from the harness the lead reads in its current or next session."""
        send(self.store, self.run, LEAD, text, sender=HARNESS, key=self.key)
