"""The fleet's driver: catch up with the log → ask the pure scheduler → start attempts → append.

`run_fleet` opens the run (`hilbert.fleet.setup`: a fresh one, or one whose process died, reconciled
first) and drives it until nothing runs and nothing can start. Its state is the fold of the run's log
(`ctx.state`); what it keeps in memory are runtime handles only (asyncio tasks, the workers' names
while they run), so a run killed at any moment resumes from the log (`hilbert run --resume`). Each
attempt (`fleet.attempt`) gets a workspace at the integration tip and hilbert's agent loop with the
stop gate; its typed outcome names the candidate the gate's `gate_verdict` accepted, which goes
through the `MergeQueue`; failures are retried or escalated to the lead (`fleet.lead`). Cancelled
(Ctrl-C) it stops cleanly: in-flight work is kept for the resume, and the log says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from hilbert.agent.policies import AgentResult
from hilbert.commands import Runner
from hilbert.fleet.attempt import AttemptOutcome, Attempts
from hilbert.fleet.context import Models, RunContext
from hilbert.fleet.crash import Crashes
from hilbert.fleet.events import (
    FleetFinished,
    FleetInterrupted,
    MergeError,
    PanelAgreement,
    TaskError,
    TaskEscalated,
    TaskRetried,
    TaskStopped,
)
from hilbert.fleet.inbox import EVERYONE, HARNESS
from hilbert.fleet.lead import Lead
from hilbert.fleet.liveness import watch
from hilbert.fleet.merge_queue import Candidate, MergeQueue, Outcome
from hilbert.fleet.names import Name, allocate
from hilbert.fleet.plan import Plan
from hilbert.fleet.scheduler import TaskState, after_failure, blocked, ready
from hilbert.fleet.setup import Opened, open_run
from hilbert.fleet.stop_gate import IMPOSSIBLE, Panel
from hilbert.judge.panel import merge_statistics
from hilbert.models.types import Model
from hilbert.settings import Settings
from hilbert.skills import Skill
from hilbert.store import EventStore

__all__ = ["HARNESS", "FleetResult", "run_fleet"]


@dataclass(frozen=True)
class FleetResult:
    run: str
    states: Mapping[str, TaskState]
    integration_repo: Path
    integration_tip: str
    stuck: Mapping[str, str]
    interrupted: bool = False

    @property
    def all_done(self) -> bool:
        return all(state.status == "done" for state in self.states.values())


async def run_fleet(
    plan: Plan | None,
    *,
    repo: Path | None,
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
    resume: bool = False,
    crashes: Crashes | None = None,
) -> FleetResult:
    """Run `plan` on a copy of `repo` (under `root`) until nothing is left to do, or with `resume`
    go on with the run the log holds (plan and repository from the log). Without `lead_model`
    escalated tasks stay escalated; `judge_model` gives the stop gate its model verdict and `panel`
    reviews what it passed; `heldout_root` is the folder the plan's `heldout:` paths are relative
    to. Every command goes through `runner`, the run's folder hidden. `settings` is the run's whole
    configuration (`fleet`, `budgets`, `gate`, `liveness`, `context`, `commands`, `timeouts`)."""
    models = Models(model, lead_model, judge_model, panel)
    async with open_run(
        plan,
        repo=repo,
        root=root,
        run=run,
        store=store,
        settings=settings,
        runner=runner,
        models=models,
        heldout_root=heldout_root,
        skills=skills,
        resume=resume,
        crashes=crashes,
    ) as opened:
        return await _Driver(opened).go()


class _Driver:
    def __init__(self, opened: Opened) -> None:
        self.ctx: RunContext = opened.ctx
        self.queue: MergeQueue = opened.queue
        self.resuming = opened.resuming
        self.attempts = Attempts(self.ctx, roster=lambda: list(self.names.values()))
        self.names: dict[str, Name] = {}  # running task -> its worker (a handle, also in the log)
        self.lead = Lead(self.ctx, roster=lambda: list(self.names.values()))
        self.running: dict[asyncio.Task[AttemptOutcome], str] = {}

    def start(self, task_id: str, name: Name, resumed: Any = None) -> None:
        assert self.ctx.state.plan is not None
        task = next(t for t in self.ctx.state.plan.tasks if t.id == task_id)
        self.names[task_id] = name
        self.running[asyncio.create_task(self.attempts.run(task, name, resumed))] = task_id

    async def go(self) -> FleetResult:
        ctx, settings = self.ctx, self.ctx.settings
        for task_id, attempt in self.resuming.items():
            self.start(task_id, Name(attempt.worker_id, attempt.worker), attempt)
        merging: asyncio.Task[list[Outcome]] | None = None
        leading: asyncio.Task[AgentResult] | None = None
        waker: asyncio.Task[Any] | None = None
        verify_of = {t.id: t.verify for t in ctx.state.plan.tasks} if ctx.state.plan else {}
        watching = asyncio.create_task(
            watch(
                ctx.fold,
                self.attempts.watches,
                settings.liveness,
                verify_of=lambda task_id: verify_of.get(task_id, ""),
                record=ctx.record,
                restart=self.attempts.restart,
                key=ctx.key,
            )
        )
        deciding = asyncio.create_task(self.lead.watch_proposals())
        interrupted = False
        try:
            while True:  # until nothing runs and nothing can start
                state = ctx.fold.catch_up()
                assert state.plan is not None
                stopping = EVERYONE in state.stops or ctx.cost.spent_usd >= ctx.cost.max_usd
                for task_id in (
                    [] if stopping else ready(state.plan, state.states, max_running=settings.fleet.workers)
                ):
                    taken = [*state.workers_used, *(n.id for n in self.names.values())]
                    name = allocate(1, taken=taken)[0]
                    ctx.set_state(replace(state.states[task_id], status="running", worker=name.display))
                    self.start(task_id, name)
                if merging is None and self.queue.pending:
                    merging = asyncio.create_task(self.queue.process())
                unanswered = state.unanswered()
                if leading is None and unanswered and self.lead.may_act(stopping):
                    leading = asyncio.create_task(
                        self.lead.consult(unanswered[: settings.fleet.escalations_per_session])
                    )
                waiting = set(self.running) | {task for task in (merging, leading) if task is not None}
                if not waiting:
                    break  # the scheduler has nothing left, or the rest is blocked
                waker = waker or asyncio.create_task(self.lead.woken.wait())
                done, _ = await asyncio.wait(waiting | {waker}, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if finished is waker:
                        waker = None
                        self.lead.woken.clear()
                    elif finished is merging:
                        merging_task, merging = merging, None
                        self.merged(merging_task)
                    elif finished is leading:
                        leading_task, leading = leading, None
                        self.lead.consulted(leading_task)
                    else:
                        task_id = self.running.pop(finished)  # type: ignore[arg-type]
                        self.names.pop(task_id, None)
                        self.attempted(task_id, finished)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            interrupted = self.attempts.interrupted = True  # every workspace stays for the resume
            ctx.record(FleetInterrupted(why="interrupted: in-flight work is kept; resume it with --resume"))
            raise
        finally:
            others = [task for task in (merging, leading, waker, watching, deciding) if task is not None]
            for pending in [*self.running, *others]:
                pending.cancel()
            await asyncio.gather(*self.running, *others, return_exceptions=True)
            await self.queue.close()
        return await self.finish(interrupted)

    async def finish(self, interrupted: bool) -> FleetResult:
        ctx = self.ctx
        state = ctx.fold.catch_up()
        assert state.plan is not None
        tip = await ctx.integration.tip()
        stuck = blocked(state.plan, state.states)
        if ctx.models.panel is not None:  # how often each pair of reviewers' models agreed, over the run
            reviewed = [
                e.data for e in ctx.store.events(run=ctx.run, agent=HARNESS, kinds=["panel_reviewed"])
            ]
            pairs = [{**asdict(p), "rate": p.rate} for p in merge_statistics(reviewed)]
            ctx.record(PanelAgreement(pairs=pairs, reviews=len(reviewed)))
        ctx.record(FleetFinished(states={k: v.status for k, v in state.states.items()}, tip=tip, stuck=stuck))
        return FleetResult(ctx.run, dict(state.states), ctx.integration.path, tip, stuck, interrupted)

    def attempted(self, task_id: str, finished: asyncio.Task[AttemptOutcome]) -> None:
        error = finished.exception()
        if error is not None:  # a harness step failed (git, the disk): the task is retried
            self.ctx.record(TaskError(task=task_id, error=f"{type(error).__name__}: {error}"))
            self.failed(task_id, f"the harness failed: {type(error).__name__}: {error}")
        else:
            self.settle(task_id, finished.result())

    def settle(self, task_id: str, outcome: AttemptOutcome) -> None:
        """What the run does with an attempt's outcome: decided from its typed cause, never its text."""
        ctx, state = self.ctx, self.ctx.state.states[task_id]
        if outcome.candidate is not None:
            ctx.set_state(replace(state, status="verifying"))
            self.queue.submit(Candidate(task_id, outcome.candidate, self.verify(task_id)))
        elif outcome.cause in (
            "person",
            "cost_cap",
        ):  # the person's decision (or the budget's), not the lead's
            ctx.record(TaskStopped(task=task_id, why=outcome.reason))
            ctx.set_state(replace(state, status="escalated"))
        elif outcome.cause == "impossible":  # not a retry: the lead decides
            ctx.record(TaskEscalated(task=task_id, why=outcome.reason, decision=IMPOSSIBLE))
            ctx.set_state(replace(state, status="escalated"))
        else:
            self.failed(task_id, f"{outcome.status}: {outcome.reason}")

    def verify(self, task_id: str) -> str:
        assert self.ctx.state.plan is not None
        return next(t.verify for t in self.ctx.state.plan.tasks if t.id == task_id)

    def merged(self, finished: asyncio.Task[list[Outcome]]) -> None:
        ctx = self.ctx
        error = finished.exception()
        if error is not None:  # the queue's git or check step failed: its refs survive
            ctx.record(MergeError(error=f"{type(error).__name__}: {error}"))
            waiting = {c.task_id for c in self.queue.pending}
            for task_id, state in list(ctx.state.states.items()):
                if state.status == "verifying" and task_id not in waiting:
                    self.failed(task_id, f"the merge queue failed: {type(error).__name__}: {error}")
            return
        for outcome in finished.result():
            if outcome.kind == "merged":
                ctx.set_state(replace(ctx.state.states[outcome.task_id], status="done"))
            elif outcome.kind in ("conflict", "rejected"):
                self.failed(outcome.task_id, f"{outcome.kind}: {outcome.hunks or outcome.output}"[:4000])

    def failed(self, task_id: str, why: str) -> None:
        ctx = self.ctx
        ctx.set_state(replace(ctx.state.states[task_id], status="failed"))
        assert ctx.state.plan is not None
        task = next(t for t in ctx.state.plan.tasks if t.id == task_id)
        decision = after_failure(
            task, ctx.state.states[task_id], max_attempts=ctx.settings.fleet.max_attempts
        )
        event = TaskRetried if decision.kind == "retry" else TaskEscalated
        ctx.record(event(task=task_id, why=why, decision=decision.reason))
        ctx.set_state(decision.state)
