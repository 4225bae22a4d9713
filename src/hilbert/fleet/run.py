"""The fleet's driver: catch up with the log → ask the pure scheduler → start attempts → append.

`run_fleet` opens the run (`hilbert.fleet.setup`: a fresh one, or one whose process died, reconciled
first) and drives it until nothing runs and nothing can start. Its state is the fold of the run's log
(`ctx.state`); what it keeps in memory are runtime handles only (asyncio tasks, the names of the
workers running now), so a run killed at any moment resumes from the log (`hilbert run --resume`).
Each attempt (`fleet.attempt`) gets a workspace at the integration tip and hilbert's agent loop with
the stop gate; its typed outcome names the candidate the gate's `gate_verdict` accepted, which goes
through the `MergeQueue`; what follows an outcome is decided by `fleet.outcomes` (pure), escalations
by the lead (`fleet.lead`). Cancelled (Ctrl-C) it stops cleanly: in-flight work is kept for the
resume, and the log says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from hilbert.agent.policies import AgentResult
from hilbert.commands import Runner
from hilbert.fleet.attempt import Attempts
from hilbert.fleet.budget import Caps, run_stopped
from hilbert.fleet.context import Models
from hilbert.fleet.crash import Crashes
from hilbert.fleet.disk import DiskGuard
from hilbert.fleet.events import (
    FleetEvent,
    FleetFinished,
    FleetInterrupted,
    MergeError,
    MergeRequeued,
    PanelAgreement,
    TaskError,
)
from hilbert.fleet.final_check import FinalCheck
from hilbert.fleet.inbox import EVERYONE, HARNESS
from hilbert.fleet.lead import Lead
from hilbert.fleet.liveness import watch
from hilbert.fleet.merge_queue import Candidate, Outcome
from hilbert.fleet.names import Name, allocate
from hilbert.fleet.outcomes import AttemptOutcome, FleetResult, after_attempt, after_merge, failure
from hilbert.fleet.person import needs_you
from hilbert.fleet.plan import Plan
from hilbert.fleet.scheduler import blocked, ready
from hilbert.fleet.seams import External, Place
from hilbert.fleet.setup import Opened, open_run
from hilbert.fleet.state import FleetState
from hilbert.fleet.stop_gate import Panel
from hilbert.judge.panel import merge_statistics
from hilbert.models.types import Model
from hilbert.settings import Settings
from hilbert.skills import Skill
from hilbert.store import EventStore

__all__ = ["HARNESS", "FleetResult", "run_fleet"]


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
    worker: External | None = None,
    runtime: Place = Attempts,
    snapshot: bool = False,
    into: str | None = None,
) -> FleetResult:
    """Run `plan` on a copy of `repo` (under `root`) until nothing is left to do, or with `resume` go
    on with the run the log holds. Without `lead_model` escalated tasks stay escalated; `judge_model`
    gives the stop gate its model verdict, `panel` reviews what it passed; `heldout_root` is the folder
    the plan's `heldout:` paths are relative to. Every command goes through `runner`, the run's folder
    hidden. `settings` is the run's whole configuration (`hilbert.fleet.setup.open_run`). `worker`: an
    external worker instead of hilbert's loop; `runtime`: what places attempts (`hilbert.fleet.seams`);
    `snapshot`: start from the repository's uncommitted working tree (`--allow-dirty`); `into`: the
    person's branch the result goes to (`--into`), kept in the log for a resume."""
    models = Models(model, lead_model, judge_model, panel)
    async with open_run(
        plan, repo=repo, root=root, run=run, store=store, settings=settings, runner=runner, models=models,
        heldout_root=heldout_root, skills=skills, resume=resume, crashes=crashes, snapshot=snapshot,
        into=into,
    ) as opened:  # fmt: skip
        return await _Driver(opened, runtime, worker).go()


class _Driver:
    def __init__(self, opened: Opened, runtime: Place, worker: External | None) -> None:
        self.ctx, self.queue, self.resuming = opened.ctx, opened.queue, opened.resuming
        self.names: dict[str, Name] = {}  # running task -> its worker (a handle; the log has it too)
        self.attempts = runtime(self.ctx, lambda: list(self.names.values()), worker)
        self.lead = Lead(self.ctx, roster=lambda: list(self.names.values()), release=self.release)
        self.running: dict[asyncio.Task[AttemptOutcome], str] = {}
        self.max_attempts = self.ctx.settings.fleet.max_attempts
        running = lambda: dict(self.names)  # noqa: E731
        self.disk = DiskGuard(self.ctx.root, self.ctx.settings.fleet, record=self.ctx.record, running=running)
        self.batch: tuple[int, dict[str, Candidate]] = (0, {})  # the merge's: the disk's spells, candidates
        self.final = FinalCheck(self.ctx)
        self.caps = Caps.of(self.ctx.settings.budgets)

    def start(self, task_id: str, name: Name, resumed: Any = None) -> None:
        self.names[task_id] = name
        attempt = self.attempts.run(self.ctx.state.task(task_id), name, resumed)
        self.running[asyncio.create_task(attempt)] = task_id

    def record(self, events: list[FleetEvent]) -> None:
        for event in events:
            self.ctx.record(event)

    async def go(self) -> FleetResult:
        ctx, fleet = self.ctx, self.ctx.settings.fleet
        for task_id, resumed in self.resuming.items():
            self.start(task_id, Name(resumed.worker_id, resumed.worker), resumed)
        merging: asyncio.Task[list[Outcome]] | None = None
        leading: asyncio.Task[AgentResult] | None = None
        checking: asyncio.Task[list[FleetEvent]] | None = None  # the final check (`fleet.final_check`)
        waker: asyncio.Task[Any] | None = None
        verify = lambda task_id: ctx.state.task(task_id).verify  # noqa: E731
        liveness = ctx.settings.liveness
        watching = asyncio.create_task(
            watch(ctx.fold, self.attempts.watches, liveness, verify_of=verify, record=ctx.record,
                  restart=self.attempts.restart, key=ctx.key)
        )  # fmt: skip
        deciding = asyncio.create_task(self.lead.watch_proposals())
        self.disk.start()  # a reserve for the log, given up when it cannot write (`fleet.disk`)
        ctx.store.on_full(self.disk.make_room)
        disk = asyncio.create_task(self.disk.watch())
        roomy: asyncio.Task[Any] | None = None  # wakes the loop when a full disk has room again
        interrupted = False
        try:
            while True:  # until nothing runs and nothing can start
                state = ctx.fold.catch_up()
                stopping = (
                    EVERYONE in state.stops
                    or ctx.cost.spent_usd >= ctx.cost.max_usd
                    or run_stopped(state, self.caps)  # a hard or refused run-wide budget (`fleet.budget`)
                )
                self.record(self.to_person(state, stopping))  # escalations no lead will answer
                state = ctx.fold.catch_up()
                assert state.plan is not None
                paused = self.disk.full  # nothing new starts on a full disk; what runs goes on
                conflicted = [  # wait for the merge queue (not for a held candidate: that may wait long)
                    t for t, w in state.current.items() if state.attempts[w].landed == "conflict"
                ] if state.queue else []  # fmt: skip
                starting = ready(state.plan, state.states, max_running=fleet.workers, behind_queue=conflicted)
                for task_id in [] if stopping or paused else starting:
                    name = allocate(1, taken=[*state.workers_used, *(n.id for n in self.names.values())])[0]
                    ctx.set_state(replace(state.states[task_id], status="running", worker=name.display))
                    self.start(task_id, name)
                if merging is None and self.queue.pending and not paused:
                    self.batch = (self.disk.spells, {c.task_id: c for c in self.queue.pending})
                    merging = asyncio.create_task(self.queue.process())
                unanswered = state.unanswered()[: fleet.escalations_per_session]
                if leading is None and (unanswered or self.lead.candidates()) and self.lead.may_act(stopping):
                    leading = asyncio.create_task(self.lead.consult(unanswered))
                waiting = set(self.running) | {t for t in (merging, leading, checking) if t is not None}
                if (
                    not waiting
                    and not stopping
                    and not paused
                    and self.final.due(tip := await ctx.integration.tip())
                ):
                    checking = asyncio.create_task(self.final.check(tip))  # nothing runs: the last look
                    waiting.add(checking)
                if not waiting and not (paused and not stopping and (starting or self.queue.pending)):
                    break  # the scheduler has nothing left, or the rest is blocked
                waker = waker or asyncio.create_task(self.lead.woken.wait())
                roomy = roomy or asyncio.create_task(self.disk.woken.wait())
                done, _ = await asyncio.wait(waiting | {waker, roomy}, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if finished is roomy:
                        roomy = None
                        self.disk.woken.clear()
                    elif finished is waker:
                        waker = None
                        self.lead.woken.clear()
                    elif finished is merging:
                        merged, merging = merging, None
                        self.merged(merged)
                    elif finished is leading:
                        consulted, leading = leading, None
                        self.lead.consulted(consulted)
                    elif finished is checking:
                        checked, checking = checking, None
                        self.record(self.final.settled(checked))
                    else:
                        self.attempted(finished)  # type: ignore[arg-type]
        except asyncio.CancelledError:
            interrupted = self.attempts.interrupted = True  # every workspace stays for the resume
            ctx.record(FleetInterrupted(why="interrupted: in-flight work is kept; resume it with --resume"))
            raise
        finally:
            ctx.store.on_full(None)
            self.disk.close()
            others = [
                t
                for t in (merging, leading, checking, waker, roomy, watching, deciding, disk)
                if t is not None
            ]
            for pending in [*self.running, *others]:
                pending.cancel()
            await asyncio.gather(*self.running, *others, return_exceptions=True)
            await self.queue.close()
            await self.final.close()
        return await self.finish(interrupted)

    async def finish(self, interrupted: bool) -> FleetResult:
        ctx, state = self.ctx, self.ctx.fold.catch_up()
        assert state.plan is not None
        tip, stuck = await ctx.integration.tip(), blocked(state.plan, state.states)
        if ctx.models.panel is not None:  # how often each pair of reviewers' models agreed, over the run
            reviewed = [
                e.data for e in ctx.store.events(run=ctx.run, agent=HARNESS, kinds=["panel_reviewed"])
            ]
            pairs = [{**asdict(p), "rate": p.rate} for p in merge_statistics(reviewed)]
            ctx.record(PanelAgreement(pairs=pairs, reviews=len(reviewed)))
        ctx.record(FleetFinished(states={k: v.status for k, v in state.states.items()}, tip=tip, stuck=stuck))
        final = state.final_checks[-1] if state.final_checks else None
        return FleetResult(ctx.run, dict(state.states), ctx.integration.path, tip, stuck, interrupted, final)

    def attempted(self, finished: asyncio.Task[AttemptOutcome]) -> None:
        task_id = self.running.pop(finished)
        self.names.pop(task_id, None)
        task, state = self.ctx.state.task(task_id), self.ctx.state.states[task_id]
        error = finished.exception()
        if error is not None:  # a harness step failed (git, the disk): the task is retried
            why = f"{type(error).__name__}: {error}"
            self.ctx.record(TaskError(task=task_id, error=why))
            self.record(failure(task, state, f"the harness failed: {why}", max_attempts=self.max_attempts))
            return
        outcome = finished.result()
        self.record(after_attempt(task, state, outcome, max_attempts=self.max_attempts))
        if outcome.candidate is not None and task_id not in self.ctx.state.held:  # held: a peer's message
            self.queue.submit(Candidate(task_id, outcome.candidate, task.verify))

    def to_person(self, state: FleetState, stopping: bool) -> list[FleetEvent]:
        models, fleet = self.ctx.models, self.ctx.settings.fleet
        return needs_you(
            state,
            lead=models.lead is not None,
            same_model=models.lead is not None and models.lead.name == models.worker.name,
            sessions_left=state.lead_sessions < fleet.lead_sessions,
            stopping=stopping,
        )

    def release(self, task_id: str) -> None:
        """A held candidate the person approved goes to the merge queue (`hilbert.fleet.tainted`)."""
        ref = self.ctx.state.queue.get(task_id)
        if ref is not None and all(c.task_id != task_id for c in self.queue.pending):
            self.queue.submit(Candidate(task_id, ref, self.ctx.state.task(task_id).verify))

    def merged(self, finished: asyncio.Task[list[Outcome]]) -> None:
        ctx = self.ctx
        error = finished.exception()
        outcomes = finished.result() if error is None else []
        spells, batch = self.batch
        if self.disk.spoiled(spells):  # a merge that failed on a full disk says nothing of its candidates
            self.requeue([c for task, c in batch.items() if task not in ctx.state.merged])
            error, outcomes = None, [o for o in outcomes if o.kind == "merged"]
        if error is not None:  # the queue's git or check step failed: its refs survive
            why = f"the merge queue failed: {type(error).__name__}: {error}"
            ctx.record(MergeError(error=why))
            waiting = {c.task_id for c in self.queue.pending}
            for task_id, state in list(ctx.state.states.items()):
                if state.status == "verifying" and task_id not in waiting:
                    self.record(failure(ctx.state.task(task_id), state, why, max_attempts=self.max_attempts))
            return
        for outcome in outcomes:
            task = ctx.state.task(outcome.task_id)
            self.record(after_merge(task, ctx.state.states[task.id], outcome, max_attempts=self.max_attempts))

    def requeue(self, candidates: list[Candidate]) -> None:
        """Candidates whose merge ran while the disk was full wait for the next batch."""
        waiting = {c.task_id for c in self.queue.pending}
        back = [c for c in candidates if c.task_id not in waiting]
        for candidate in back:
            self.queue.submit(candidate)
        if back:
            why = "the disk filled while they were merged: they are merged again once there is room"
            self.ctx.record(MergeRequeued(tasks=[c.task_id for c in back], base="", reason=why))
