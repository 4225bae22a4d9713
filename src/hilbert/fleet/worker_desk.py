"""The fleet's worker-facing half: one worker's attempt at a task — its workspace, prompt, tools
(with `send_message`), policies (budget, cost pool, inbox, reminders, the stop gate) — and its agent
loop, resumed from the workspace and the log when it crashes or hangs.

`WorkerDesk` is a base of the fleet's runtime (`hilbert.fleet.run._Fleet`), which owns the state these
methods use (declared below), as `LeadDesk` is for the lead's side.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import AgentResult, CostLimit, CostPool, SharedCostLimit, TurnLimit
from hilbert.agent.reminders import Reminders, acceptance_items
from hilbert.agent.tools import ScopedTools, ToolBox, Tools
from hilbert.commands import Runner
from hilbert.context.policy import compaction_for
from hilbert.errors import RunError
from hilbert.fleet.inbox import Inbox
from hilbert.fleet.liveness import Watch, minutes
from hilbert.fleet.messages import MessageTools
from hilbert.fleet.names import Name
from hilbert.fleet.plan import Budget, Task
from hilbert.fleet.stop_gate import Panel, StopGate
from hilbert.models.types import Model
from hilbert.security.envelope import ENVELOPE_RULES, MessageKey, defang
from hilbert.settings import Settings
from hilbert.skills import Skill
from hilbert.store import EventStore, rebuild_conversation
from hilbert.workspaces import Checkout, Git, Workspaces
from hilbert.workspaces.integration import Integration

WORKER_TASK = """Task {id}: {title}
The task is done when `{verify}` passes. Change only what the task needs{claims}.
Do not edit or skip tests. Finish with the command's output as evidence.
{messages}

{description}"""


class WorkerDesk:
    # the fleet's state these methods use (set by `_Fleet.__init__`, `go` and `run_fleet`)
    run: str
    root: Path
    model: Model
    store: EventStore
    settings: Settings
    git: Git
    integration: Integration
    workspaces: Workspaces
    workers: dict[str, Name]
    feedback: dict[str, str]
    notes: dict[str, list[str]]
    cost: CostPool
    key: MessageKey
    judge_model: Model | None
    panel: Panel | None
    runner: Runner  # every command of the run's workers and of its stop gates
    heldout: dict[str, Path]
    skills: tuple[Skill, ...]
    system_prompt: str  # the same for every worker of the run (the repository map in it)
    watches: dict[str, Watch]
    agent_runs: dict[str, asyncio.Task[AgentResult]]
    restart_wanted: set[str]
    fallback_noted: bool
    record: Callable[[str, dict[str, Any]], None]  # the fleet's: append a harness event

    async def attempt(self, task: Task, name: Name) -> tuple[AgentResult, str | None]:
        """One worker's attempt at a task; its verified commit, already fetched for the merge queue.
        The workspace is closed (removed when its work is safe in the integration repo, else archived)
        however the attempt ends, cancellation included."""
        tip = await self.integration.tip()
        checkout = await self.workspaces.provision(name.id, tip)
        self.note_fallback()
        self.record(
            "task_started",
            {"task": task.id, "worker": name.display, "base": tip, "workspace": str(checkout.work_tree)},
        )
        gate = StopGate(
            task,
            self.workspaces,
            checkout,
            self.record,
            git=self.git,
            scratch=self.root / "gate",
            runner=self.runner,
            judge=self.judge_model,
            heldout=self.heldout.get(task.id),
            panel=self.panel,
            cost=self.cost,
            max_rounds=self.settings.gate.rounds,
            gate_timeout_s=self.settings.timeouts.gate_s,
        )
        claims = f" (expected: {', '.join(task.claims)})" if task.claims else ""
        prompt = WORKER_TASK.format(  # the plan's text, too, cannot forge an envelope
            id=task.id,
            title=defang(task.title),
            description=defang(task.description or task.title),
            verify=defang(task.verify),
            claims=defang(claims),
            messages=ENVELOPE_RULES,
        )
        for skill in self.skills:
            prompt += f"\n\nSkill `{skill.name}` ({defang(skill.description)}):\n{defang(skill.body)}"
        if task.id in self.feedback:
            prompt += f"\n\nAn earlier attempt at this task did not land:\n{defang(self.feedback[task.id])}"
        for note in self.notes.get(task.id, []):
            prompt += f"\n\nThe lead's note: {defang(note)}"
        inbox = Inbox(self.store, self.run, name.display, key=self.key)  # one for all runs of the attempt
        tools: Tools = MessageTools(
            ToolBox(checkout.work_tree, runner=self.runner),
            store=self.store,
            run=self.run,
            sender=name.display,
            inbox=inbox,
            roster=lambda: list(self.workers.values()),
            key=self.key,
        )
        scope = task.scope()
        if scope is not None:  # fixed by the plan, before the worker reads anything
            tools = ScopedTools(tools, scope)
        ref = None
        try:
            result = await self.run_worker(task, name, prompt, tools, gate, checkout, inbox)
            if gate.passed_commit and result.status in ("finished", "no_finish"):
                ref = f"refs/hilbert/candidates/{task.id}/{name.id}"
                await self.workspaces.fetch_into(checkout, self.integration, ref)
        finally:  # work that reached the integration repo as a candidate is kept there; the rest archived
            kept = await asyncio.shield(self.workspaces.archive_or_remove(checkout, self.integration, ref))
            self.record("workspace_closed", {"worker": checkout.worker_id, "message": kept})
        return result, ref

    async def run_worker(
        self,
        task: Task,
        name: Name,
        prompt: str,
        tools: Tools,
        gate: StopGate,
        checkout: Checkout,
        inbox: Inbox,
    ) -> AgentResult:
        """The worker's agent loop, resumed from its workspace and the log when it crashes or hangs
        (at most `liveness.restarts` times); every run's spend counts toward the run's cost cap."""
        budget = task.budget or Budget()  # the plan's per-attempt budget, else the run's defaults
        history, restarts = None, 0
        while True:
            spend = SharedCostLimit(self.cost)
            self.watches[task.id] = Watch(name.display, task.id, time.time(), busy=lambda: gate.judging)
            runner = asyncio.create_task(
                run_agent(
                    run=self.run,
                    agent=name.display,
                    task=prompt,
                    model=self.model,
                    system_prompt=self.system_prompt,
                    toolbox=tools,
                    store=self.store,
                    history=history,
                    policies=[
                        TurnLimit(budget.turns or self.settings.budgets.max_turns),
                        *([CostLimit(budget.usd)] if budget.usd else []),
                        spend,
                        inbox,
                        Reminders(task.verify, acceptance_items(task.description, task.verify)),
                        compaction_for(self.settings.context.strategy, model=self.model, store=self.store),
                        gate,
                    ],
                )
            )
            self.agent_runs[task.id] = runner
            try:
                result = await runner
            except asyncio.CancelledError:
                spend.settle(self.stopped_cost(name.display))
                current = asyncio.current_task()
                if (current and current.cancelling()) or task.id not in self.restart_wanted:
                    raise
                if restarts >= self.settings.liveness.restarts or not await self.usable(checkout):
                    raise RunError(
                        f"{name.display} hung and cannot be restarted", hint="see its log"
                    ) from None
                why = f"no heartbeat for {minutes(self.settings.liveness.dead_after_s)}"
            except Exception as crash:
                spend.settle(self.stopped_cost(name.display))
                if restarts >= self.settings.liveness.restarts or not await self.usable(checkout):
                    raise
                why = f"{type(crash).__name__}: {crash}"
            else:
                spend.settle(result.cost_usd)
                return result
            finally:
                self.watches.pop(task.id, None)
                self.agent_runs.pop(task.id, None)
                self.restart_wanted.discard(task.id)
            restarts += 1
            history = rebuild_conversation(self.store, self.run, name.display)
            self.record(
                "worker_restarted",
                {
                    "task": task.id,
                    "worker": name.display,
                    "why": why,
                    "restart": restarts,
                    "kept": len(history),
                },
            )

    def stopped_cost(self, agent: str) -> float:
        """What the agent's last run spent, from its `agent_stopped` event (0 when there is none)."""
        stopped = self.store.events(run=self.run, agent=agent, kinds=["agent_stopped"])
        return float(stopped[-1].data.get("cost_usd", 0.0)) if stopped else 0.0

    async def usable(self, checkout: Checkout) -> bool:
        """The worker's repository and work tree are still there to restart it in."""
        found = await self.git.run("rev-parse", "--git-dir", cwd=checkout.git_dir, check=False)
        return found.returncode == 0 and checkout.work_tree.is_dir()

    def restart(self, task_id: str) -> None:
        """Liveness found the worker on `task_id` hung: cancel its loop, for `run_worker` to resume it."""
        if task_id in self.agent_runs and not self.agent_runs[task_id].done():
            self.restart_wanted.add(task_id)
            self.agent_runs[task_id].cancel()

    def note_fallback(self) -> None:
        """Say once in the log that workspaces fell back to full private clones, and why."""
        if self.workspaces.fallback_reason and not self.fallback_noted:
            self.fallback_noted = True
            self.record("workspaces_fallback", {"strategy": "clone", "why": self.workspaces.fallback_reason})
