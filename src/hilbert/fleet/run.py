"""Running a plan: named workers in isolated workspaces, the stop gate, the merge queue.

`run_fleet` is the local runtime's loop (a Ray runtime can replace it later): it asks the pure
`scheduler` what may start; each worker's attempt (`worker_desk`) gets a workspace at the integration
tip and hilbert's agent loop with `Reminders` and the `StopGate` on stop (verify on a clean export,
integrity checks, held-out tests, the judge model when the run has one); the run sends gated commits
through the `MergeQueue`, watches liveness, and retries or escalates failures; a task the judge calls
impossible goes to the lead at once.
Escalated tasks go to the lead (given a `lead_model`, `lead_desk`): a session of the agent loop whose
tools (`escalation`) reassign, split, add, mark impossible or message workers — the run applies what
it decides (`steer`) and records it. Every decision is an event of the harness (agent
"harness") in the run's log, so `status` and resume can be derived from the log.

The person's repository is never written: the run works in a bare clone of it under `root`, whose
branch `hilbert/integration` only ever moves to commits whose checks passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hilbert.agent import prompts
from hilbert.agent.policies import COST_CAP, AgentResult, CostPool
from hilbert.commands import Runner
from hilbert.context.repomap import repository_map
from hilbert.context.tokens import tokenizer_for
from hilbert.errors import UserError
from hilbert.fleet.inbox import HARNESS, LEAD, STOPPED_BY_PERSON, Inbox, stop_requested
from hilbert.fleet.lead_desk import LeadDesk
from hilbert.fleet.liveness import Watch, watch
from hilbert.fleet.merge_queue import Candidate, MergeQueue, Outcome
from hilbert.fleet.names import Name, allocate
from hilbert.fleet.plan import Plan
from hilbert.fleet.scheduler import TaskState, after_failure, blocked, ready
from hilbert.fleet.stop_gate import IMPOSSIBLE, Panel
from hilbert.fleet.worker_desk import WorkerDesk
from hilbert.judge.panel import merge_statistics
from hilbert.models.types import Model
from hilbert.security.envelope import MessageKey
from hilbert.settings import Settings
from hilbert.skills import Skill
from hilbert.store import EventStore
from hilbert.workspaces import Git, Workspaces
from hilbert.workspaces.integration import Integration


@dataclass(frozen=True)
class FleetResult:
    states: Mapping[str, TaskState]
    integration_repo: Path
    integration_tip: str
    stuck: Mapping[str, str]

    @property
    def all_done(self) -> bool:
        return all(state.status == "done" for state in self.states.values())


async def run_fleet(
    plan: Plan,
    *,
    repo: Path,
    root: Path,
    run: str,
    model: Model,
    store: EventStore,
    settings: Settings,
    runner: Runner,
    lead_model: Model | None = None,
    judge_model: Model | None = None,
    panel: Panel | None = None,
    heldout_root: Path | None = None,
    skills: Sequence[Skill] = (),
) -> FleetResult:
    """Run `plan` on a copy of `repo` (under `root`) until nothing is left to do. Without `lead_model`
    escalated tasks stay escalated; with it, the lead answers them with tools. `judge_model` gives the
    stop gate its model verdict and `panel` reviews what it passed; a task's `heldout` folder is read
    relative to `heldout_root` (the plan's folder). Every command of a worker, of the lead, of the stop
    gate and of the merge checks goes through `runner`, with the run's folder hidden (other workspaces,
    git dirs, the message key) and the rest of the machine, the person's repository included,
    read-only. `skills` are given to every worker with its task (until the skills loader, a later
    issue, indexes them). `settings` is the run's whole configuration: its `fleet`, `budgets`, `gate`,
    `liveness`, `context`, `commands` and `timeouts` sections (the models, panel and runner come built)."""
    _allow_open_files(16 * settings.fleet.workers + 256)
    heldout = _heldout_folders(plan, Path(repo).absolute(), heldout_root or Path.cwd())
    fleet = _Fleet(plan, root, run, model, store, settings, runner, lead_model)
    fleet.judge_model, fleet.panel, fleet.heldout, fleet.skills = judge_model, panel, heldout, tuple(skills)
    return await fleet.go(Path(repo).absolute())


def _heldout_folders(plan: Plan, repo: Path, root: Path) -> dict[str, Path]:
    """Each task's held-out folder, checked before anything runs: it exists, and it is outside the
    repository (tests inside it are not held out: every worker's checkout has them)."""
    folders = {}
    for task in plan.tasks:
        if task.heldout is None:
            continue
        folder = (root / task.heldout).resolve()
        if not folder.is_dir():
            raise UserError(
                f"{task.id}: heldout folder {folder} does not exist", hint="fix `heldout:` in the plan"
            )
        if folder.is_relative_to(repo.resolve()):
            raise UserError(
                f"{task.id}: heldout folder {folder} is inside the repository, so every worker sees it",
                hint="keep held-out tests outside the repository",
            )
        folders[task.id] = folder
    return folders


def _allow_open_files(needed: int) -> None:
    """Raise this process's soft limit on open files towards `needed` (within the hard limit): each
    worker holds connections, pipes of its commands and its workspace's files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):  # some systems cap below what they report
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class _Fleet(LeadDesk, WorkerDesk):
    def __init__(
        self,
        plan: Plan,
        root: Path,
        run: str,
        model: Model,
        store: EventStore,
        settings: Settings,
        runner: Runner,
        lead_model: Model | None = None,
    ) -> None:
        self.plan, self.root, self.run, self.model, self.store = (
            plan,
            Path(root).absolute(),
            run,
            model,
            store,
        )
        self.settings, self.lead_model = settings, lead_model
        self.runner = runner.hiding(self.root)  # the run's folder hidden; the repository stays, read-only
        self.answered: set[str] = set()  # escalations the lead was shown (or that are not the lead's)
        self.stopped: set[str] = set()  # tasks the person or the cost cap stopped: not the lead's to reopen
        self.notes: dict[str, list[str]] = {}  # the lead's notes for a task's later workers
        self.lead_sessions = 0
        self.key = MessageKey.for_run(self.root)  # signs every message of the run; outside every workspace
        self.lead_inbox = Inbox(store, run, LEAD, key=self.key)  # one for all sessions: none is lost
        self.fallback_noted = False
        self.workers: dict[str, Name] = {}  # running task -> its worker
        self.states = {task.id: TaskState(task.id) for task in plan.tasks}
        self.tasks = {task.id: task for task in plan.tasks}
        self.names_used: list[str] = []
        self.git = Git(home=self.root / "home")
        self.integration = Integration(self.root / "integration.git", self.git)  # made by `go`
        self.cost = CostPool(settings.fleet.max_cost_usd)
        self.feedback: dict[str, str] = {}  # why a task's last attempt did not land, for the next one
        self.judge_model: Model | None = None
        self.watches: dict[str, Watch] = {}  # running task -> what liveness knows of its worker
        self.agent_runs: dict[str, asyncio.Task[AgentResult]] = {}  # running task -> its agent loop
        self.restart_wanted: set[str] = set()  # tasks whose hung worker liveness cancelled
        self.panel: Panel | None = None
        self.heldout: dict[str, Path] = {}
        self.skills: tuple[Skill, ...] = ()
        self.system_prompt = prompts.SYSTEM_PROMPT  # every worker's; with the map once `go` made it

    def record(self, kind: str, data: dict[str, Any]) -> None:
        self.store.append(self.run, HARNESS, kind, data)

    def set_state(self, task_id: str, **changes: Any) -> None:
        self.states[task_id] = replace(self.states[task_id], **changes)
        state = self.states[task_id]
        self.record(
            "task_state",
            {
                "task": task_id,
                "status": state.status,
                "attempts": state.attempts,
                "worker": state.worker,
                "reopened": state.reopened,
            },
        )

    async def go(self, repo: Path) -> FleetResult:
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        self.integration = await Integration.create(repo, self.integration.path, self.git)
        if self.settings.context.repository_map_tokens:  # once per run, at its base: one prefix for all
            self.system_prompt = prompts.system_prompt(
                await repository_map(
                    self.integration.path,
                    await self.integration.tip(),
                    tokenizer=tokenizer_for(self.model.name),
                    git=self.git,
                    budget=self.settings.context.repository_map_tokens,
                )
            )
        self.workspaces = Workspaces(self.root, self.integration.path)
        self.queue = MergeQueue(
            self.integration,
            self.root / "merge-scratch",
            test_command=self.settings.commands.test,
            record=self.record,
            # one command at a time, on the critical path: it does not queue behind the workers' slots
            runner=replace(self.runner, slots=None),
            max_batch=self.settings.fleet.merge_batch,
        )
        self.record(
            "fleet_started",
            {
                "tasks": [t.id for t in self.plan.tasks],
                "workers": self.settings.fleet.workers,
                "test_command": self.settings.commands.test,
                "max_cost_usd": self.settings.fleet.max_cost_usd,
                "model": self.model.name,
                "integration": str(self.integration.path),
                "sandbox": self.runner.describe(),
                "pid": os.getpid(),  # so a view can tell a run whose process died (its agents are dead)
                "host": socket.gethostname(),
            },
        )
        running: dict[asyncio.Task[Any], str] = {}
        merging: asyncio.Task[Any] | None = None
        leading: asyncio.Task[Any] | None = None
        self.woken = asyncio.Event()  # the lead changed the plan or a state: look again at once
        waker: asyncio.Task[Any] | None = None
        watching = asyncio.create_task(
            watch(
                self.store,
                self.run,
                self.watches,
                self.settings.liveness,
                verify_of=lambda task_id: self.tasks[task_id].verify,
                record=self.record,
                restart=self.restart,
                key=self.key,
            )
        )
        deciding = asyncio.create_task(self.watch_proposals())  # the person's approvals (lead_desk)
        try:
            while True:  # until nothing runs and nothing can start
                stopping = stop_requested(self.store, self.run) or self.cost.spent_usd >= self.cost.max_usd
                for task_id in (
                    [] if stopping else ready(self.plan, self.states, max_running=self.settings.fleet.workers)
                ):
                    name = allocate(1, taken=self.names_used)[0]
                    self.names_used.append(name.id)
                    self.workers[task_id] = name
                    self.set_state(task_id, status="running", worker=name.display)
                    running[asyncio.create_task(self.attempt(self.tasks[task_id], name))] = task_id
                if merging is None and self.queue.pending:
                    merging = asyncio.create_task(self.queue.process())
                unanswered = [
                    t for t, s in self.states.items() if s.status == "escalated" and t not in self.answered
                ]
                if leading is None and unanswered and self.lead_may_act(stopping):
                    batch = unanswered[: self.settings.fleet.escalations_per_session]
                    leading = asyncio.create_task(self.consult_lead(batch))
                waiting = set(running) | {task for task in (merging, leading) if task is not None}
                if not waiting:
                    break  # the scheduler has nothing left, or the rest is blocked
                waker = waker or asyncio.create_task(self.woken.wait())
                done, _ = await asyncio.wait(waiting | {waker}, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if finished is waker:
                        waker = None
                        self.woken.clear()
                    elif finished is merging:
                        merging = None
                        self.merged(finished)
                    elif finished is leading:
                        leading = None
                        self.consulted(finished)
                    else:
                        task_id = running.pop(finished)
                        self.workers.pop(task_id, None)
                        self.attempted(task_id, finished)
        finally:
            others = [task for task in (merging, leading, waker, watching, deciding) if task is not None]
            for pending in [*running, *others]:
                pending.cancel()
            await asyncio.gather(*running, *others, return_exceptions=True)
            await self.queue.close()
        tip = await self.integration.tip()
        stuck = blocked(self.plan, self.states)
        if self.panel is not None:  # how often each pair of reviewers' models agreed, over the run
            reviewed = [
                e.data for e in self.store.events(run=self.run, agent=HARNESS, kinds=["panel_reviewed"])
            ]
            pairs = [{**asdict(p), "rate": p.rate} for p in merge_statistics(reviewed)]
            self.record("panel_agreement", {"pairs": pairs, "reviews": len(reviewed)})
        self.record(
            "fleet_finished",
            {"states": {k: v.status for k, v in self.states.items()}, "tip": tip, "stuck": stuck},
        )
        return FleetResult(dict(self.states), self.integration.path, tip, stuck)

    def attempted(self, task_id: str, finished: asyncio.Task[tuple[AgentResult, str | None]]) -> None:
        if finished.exception() is not None:  # a harness step failed (git, the disk): the task is retried
            error = finished.exception()
            self.record("task_error", {"task": task_id, "error": f"{type(error).__name__}: {error}"})
            self.failed(task_id, f"the harness failed: {type(error).__name__}: {error}")
            return
        result, ref = finished.result()
        self.record(
            "task_attempted",
            {"task": task_id, "status": result.status, "reason": result.reason, "candidate": ref},
        )
        if ref is None and (result.reason == STOPPED_BY_PERSON or result.reason.startswith(COST_CAP)):
            self.states[task_id] = replace(self.states[task_id], status="escalated")  # not a failed attempt
            self.answered.add(task_id)  # the person's decision (or the budget's), not one for the lead
            self.stopped.add(task_id)
            self.record("task_stopped", {"task": task_id, "why": result.reason})
            self.set_state(task_id)
        elif ref is None and result.reason.startswith(IMPOSSIBLE):  # not a retry: the lead decides
            self.feedback[task_id] = result.reason
            self.states[task_id] = replace(self.states[task_id], status="escalated")
            self.record("task_escalated", {"task": task_id, "why": result.reason, "decision": IMPOSSIBLE})
            self.set_state(task_id)
        elif ref is None:
            self.failed(task_id, f"{result.status}: {result.reason}")
        else:
            self.set_state(task_id, status="verifying")
            self.queue.submit(Candidate(task_id, ref, self.tasks[task_id].verify))

    def merged(self, finished: asyncio.Task[list[Outcome]]) -> None:
        if finished.exception() is not None:  # the queue's git or check step failed: its refs survive
            error = finished.exception()
            self.record("merge_error", {"error": f"{type(error).__name__}: {error}"})
            for task_id, state in self.states.items():
                if state.status == "verifying" and not any(c.task_id == task_id for c in self.queue.pending):
                    self.failed(task_id, f"the merge queue failed: {type(error).__name__}: {error}")
            return
        for outcome in finished.result():
            if outcome.kind == "merged":
                self.set_state(outcome.task_id, status="done")
            elif outcome.kind in ("conflict", "rejected"):
                self.failed(outcome.task_id, f"{outcome.kind}: {outcome.hunks or outcome.output}"[:4000])

    def failed(self, task_id: str, why: str) -> None:
        self.feedback[task_id] = why
        self.set_state(task_id, status="failed")
        decision = after_failure(
            self.tasks[task_id], self.states[task_id], max_attempts=self.settings.fleet.max_attempts
        )
        self.states[task_id] = decision.state
        self.record(
            "task_" + ("retried" if decision.kind == "retry" else "escalated"),
            {"task": task_id, "why": why, "decision": decision.reason},
        )
        self.set_state(task_id)
