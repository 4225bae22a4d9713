"""One worker's attempt at a task: its workspace, prompt, tools (with `send_message`), policies (budget,
cost pool, the fleet's budgets, inbox, reminders, the stop gate) and hilbert's agent loop — restarted
from its workspace and the log when it crashes or hangs, and resumed the same way when the run's process died.

`Attempts` is the local asyncio `Runtime` (`fleet.seams`); `HilbertLoop` is hilbert's `Worker`, the
stop gate its `on_stop` policy. Given an `External` worker instead, each attempt runs it gated when it
exits (`fleet.seams.run_external`). `stop_gate`, `spec_for`, `landed` and `close` are the steps of an
attempt another runtime reuses.

`Attempts.run` returns a typed `AttemptOutcome`; the candidate it names was taken from the attempt's
last `gate_verdict` in the fold (the event carries the commit) and fetched into the integration
repository. The runtime handles of running attempts (their loop tasks, liveness watches, restart
wishes) live here; they are not the run's state and are never needed to resume it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import AgentResult, CostLimit, Policy, SharedCostLimit, Stop, TurnLimit
from hilbert.agent.reminders import Reminders, acceptance_items
from hilbert.agent.tools import ScopedTools, ToolBox, Tools
from hilbert.context.policy import compaction_for
from hilbert.context.tried import TriedEdit, tried_edits, tried_note
from hilbert.errors import RunError
from hilbert.fleet.admission import admit
from hilbert.fleet.budget import BudgetGuard, Caps
from hilbert.fleet.context import RunContext
from hilbert.fleet.events import AttemptResumed, TaskAttempted, TaskStarted, WorkerRestarted
from hilbert.fleet.inbox import Inbox
from hilbert.fleet.liveness import Watch, minutes
from hilbert.fleet.messages import MessageTools
from hilbert.fleet.names import Name
from hilbert.fleet.outcomes import AttemptOutcome
from hilbert.fleet.plan import Budget, Task
from hilbert.fleet.seams import Emit, External, Grant, ModelGrant, TaskSpec, run_external
from hilbert.fleet.state import AttemptView
from hilbert.fleet.stop_gate import StopGate
from hilbert.fleet.tainted import PeerSnapshot, hold
from hilbert.models.types import Message
from hilbert.security.envelope import ENVELOPE_RULES
from hilbert.store import EventStore, every_turn, rebuild_conversation
from hilbert.workspaces import Checkout

WORKER_TASK = """Task {id}: {title}
The task is done when `{verify}` passes. Change only what the task needs{claims}.
Do not edit or skip tests. Finish with the command's output as evidence.
{messages}

{description}"""


class Attempts:
    """Runs attempts for the driver; `interrupted` (Ctrl-C) keeps every workspace for a resume."""

    def __init__(
        self, ctx: RunContext, roster: Callable[[], list[Name]], external: External | None = None
    ) -> None:
        self.ctx, self.roster = ctx, roster  # roster: the workers running now
        self.external = external  # None: hilbert's loop
        self.watches: dict[str, Watch] = {}  # running task -> what liveness knows of its worker
        self.loops: dict[str, asyncio.Task[AgentResult]] = {}  # running task -> its agent loop
        self.restart_wanted: set[str] = set()  # tasks whose hung worker liveness cancelled
        self.interrupted = False

    async def run(self, task: Task, name: Name, resumed: AttemptView | None = None) -> AttemptOutcome:
        """One attempt (or the rest of one whose orchestrator died: `resumed`). Its workspace is closed
        (removed when its work is safe in the integration repository, else archived) however it ends,
        but for an interrupted run, whose workspaces wait for the resume."""
        ctx = self.ctx
        if resumed is None:
            if ctx.admission is not None:  # a self-hosted engine whose KV cache is full: wait first
                await admit(ctx.admission, ctx.record, task.id, name.display)
            tip = await ctx.integration.tip()
            checkout = await ctx.workspaces.provision(name.id, tip)
            workspace = str(checkout.work_tree)
            ctx.record(
                TaskStarted(
                    task=task.id, worker=name.display, worker_id=name.id, base=tip, workspace=workspace
                )
            )
        else:
            checkout = ctx.workspaces.existing(name.id, resumed.base)
        outcome = AttemptOutcome("error", "", "the attempt did not end")
        try:
            outcome = await landed(ctx, task, name, checkout, await self.work(task, name, checkout, resumed))
        finally:
            if not self.interrupted:
                await close(ctx, checkout, outcome)
        return outcome

    async def work(
        self, task: Task, name: Name, checkout: Checkout, resumed: AttemptView | None
    ) -> AttemptOutcome:
        ctx = self.ctx
        gate = stop_gate(ctx, task, checkout, rounds=resumed.rounds if resumed else 0)
        if self.external is not None:  # not hilbert's loop: gated when it exits
            if resumed is not None and resumed.accepted is not None:
                return AttemptOutcome("finished", "", "accepted before the run was interrupted")
            if resumed is not None:  # its conversation is its own: it runs again in its workspace
                why = "an external worker runs again in its workspace"
                ctx.record(AttemptResumed(task=task.id, worker=name.display, how="restarted", why=why))
            external, spec = self.external, spec_for(ctx, task, name)
            result = await run_external(ctx, external, gate, spec, checkout, external.worker)
            return AttemptOutcome(result.status, result.cause, result.reason)
        # one for all runs of the attempt; a resumed one's conversation holds what it delivered before,
        # and broadcasts and stops since its start are its own
        known = ctx.state.agents.get(name.display) if resumed is not None else None
        inbox = Inbox(
            ctx.store, ctx.run, name.display, key=ctx.key,
            after=known.delivered if known else 0, joined=resumed.joined if resumed else None,
        )  # fmt: skip
        tools: Tools = MessageTools(
            ToolBox(checkout.work_tree, runner=ctx.runner, outputs=ctx.root / "outputs" / name.id),
            store=ctx.store,
            run=ctx.run,
            sender=name.display,
            roster=self.roster,
            key=ctx.key,
        )
        scope = task.scope()
        if scope is not None:  # fixed by the plan, before the worker reads anything
            tools = ScopedTools(tools, scope)
        history: list[Message] | None = None
        if resumed is not None:
            resumed_from = await self.resume_point(task, name, checkout, resumed, gate)
            if isinstance(resumed_from, AttemptOutcome):
                return resumed_from
            history = resumed_from
        result = await self.loop(task, name, spec_for(ctx, task, name), tools, gate, checkout, inbox, history)
        reason = result.reason
        stopped = result.cause in ("person", "cost_cap", "budget", "impossible")  # no retry follows
        if result.status != "finished" and not stopped:  # the next attempt: which edits were undone
            tried = tried_note(tried_on(ctx, task))
            reason += f"\n{tried}" if tried else ""
        return AttemptOutcome(result.status, result.cause, reason)

    async def resume_point(
        self, task: Task, name: Name, checkout: Checkout, resumed: AttemptView, gate: StopGate
    ) -> list[Message] | AttemptOutcome:
        """Where an attempt whose orchestrator died goes on: its candidate fetched (the gate had
        accepted it), its gate run again on its last commit (the gate was interrupted), or its loop
        continued from the conversation the log holds. Each is an `attempt_resumed` event."""
        ctx = self.ctx

        def resumed_as(how: str, why: str) -> None:
            ctx.record(AttemptResumed(task=task.id, worker=name.display, how=how, why=why))

        if not await self.usable(checkout):  # nothing to go on with: the attempt counts as failed
            resumed_as("restarted", "its workspace is gone; the task gets a fresh attempt")
            return AttemptOutcome("error", "", "its workspace was gone when the run resumed")
        if resumed.accepted is not None:
            resumed_as("fetch", "the stop gate had accepted its commit; it goes to the merge queue")
            return AttemptOutcome("finished", "", "accepted before the run was interrupted")
        if name.display not in ctx.state.agents:  # killed between `task_started` and its loop's start
            resumed_as("continued", "its loop had not started; it starts now, in its workspace")
            return []
        history = rebuild_conversation(ctx.store, ctx.run, name.display)
        last = history[-1] if history else None
        finish = ctx.state.agents.get(name.display)
        in_gate = (
            resumed.gate_open > resumed.rounds
            or bool(finish and finish.finishing)
            or (last is not None and last.role == "assistant" and not last.tool_calls)
        )
        if not in_gate:
            resumed_as("continued", "its conversation goes on from the log")
            return history
        resumed_as("gate_rerun", "the stop gate was interrupted; it runs again on the worker's last commit")
        claim = _last_claim(ctx, name.display)
        stop = Stop("finished" if claim is not None else "no_finish", "", *(claim or ("", "")))
        for action in await gate.judge_stop(stop):
            if action.kind == "halt":
                return AttemptOutcome("halted", action.cause, action.reason)
            if action.kind == "resume":
                return [*history, action.message]
        return AttemptOutcome(stop.status, "", "accepted by the stop gate run again at resume")

    async def loop(
        self,
        task: Task,
        name: Name,
        spec: TaskSpec,
        tools: Tools,
        gate: StopGate,
        checkout: Checkout,
        inbox: Inbox,
        history: list[Message] | None,
    ) -> AgentResult:
        """The worker's agent loop, restarted from its workspace and the log when it crashes or hangs
        (at most `liveness.restarts` times); every run's spend counts toward the run's cost cap."""
        ctx = self.ctx
        budget = task.budget or Budget()  # the plan's per-attempt budget, else the run's defaults
        restarts = 0
        while True:
            spend = SharedCostLimit(ctx.cost)
            used = ctx.state.agents[name.display].turns if name.display in ctx.state.agents else 0
            caps = Caps.of(ctx.settings.budgets)
            guard = BudgetGuard(ctx.fold.catch_up, ctx.record, caps, name.display, task.id)
            waits = lambda guard=guard: gate.judging or guard.waiting is not None  # noqa: E731  (not hung)
            self.watches[task.id] = Watch(name.display, task.id, time.time(), busy=waits)
            worker = HilbertLoop(
                ctx.run,
                ctx.store,
                tools,
                history,
                policies=[
                    TurnLimit(max(0, (budget.turns or ctx.settings.budgets.max_turns) - used)),
                    *([CostLimit(budget.usd)] if budget.usd else []),
                    spend,
                    guard,  # the fleet's budgets (`fleet.budget`): waits for the person, or halts
                    PeerSnapshot(ctx, inbox, task.id, name.display, checkout),
                    Reminders(task.verify, acceptance_items(task.description, task.verify)),
                    compaction_for(ctx.settings.context.strategy, model=ctx.models.worker, store=ctx.store),
                    gate,
                ],
            )
            running = asyncio.create_task(
                worker.attempt(spec, checkout, ModelGrant(ctx.models.worker), lambda kind, data: None)
            )
            self.loops[task.id] = running
            try:
                result = await running
            except asyncio.CancelledError:
                spend.settle(self.stopped_cost(name.display))
                current = asyncio.current_task()
                if (current and current.cancelling()) or task.id not in self.restart_wanted:
                    raise
                if restarts >= ctx.settings.liveness.restarts or not await self.usable(checkout):
                    raise RunError(
                        f"{name.display} hung and cannot be restarted", hint="see its log"
                    ) from None
                why = f"no heartbeat for {minutes(ctx.settings.liveness.dead_after_s)}"
            except Exception as crash:
                spend.settle(self.stopped_cost(name.display))
                if restarts >= ctx.settings.liveness.restarts or not await self.usable(checkout):
                    raise
                why = f"{type(crash).__name__}: {crash}"
            else:
                spend.settle(result.cost_usd)
                return result
            finally:
                self.watches.pop(task.id, None)
                self.loops.pop(task.id, None)
                self.restart_wanted.discard(task.id)
            restarts += 1
            history = rebuild_conversation(ctx.store, ctx.run, name.display)
            ctx.record(
                WorkerRestarted(
                    task=task.id, worker=name.display, why=why, restart=restarts, kept=len(history)
                )
            )

    def stopped_cost(self, agent: str) -> float:
        """What the agent's last run spent, from its `agent_stopped` event (0 when there is none)."""
        stopped = self.ctx.store.events(run=self.ctx.run, agent=agent, kinds=["agent_stopped"])
        return float(stopped[-1].data.get("cost_usd", 0.0)) if stopped else 0.0

    async def usable(self, checkout: Checkout) -> bool:
        """The worker's repository and work tree are still there (to restart it in, or to close)."""
        if not checkout.git_dir.is_dir():
            return False
        found = await self.ctx.git.run("rev-parse", "--git-dir", cwd=checkout.git_dir, check=False)
        return found.returncode == 0 and checkout.work_tree.is_dir()

    def restart(self, task_id: str) -> None:
        """Liveness found the worker on `task_id` hung: cancel its loop, for `loop` to restart it."""
        if task_id in self.loops and not self.loops[task_id].done():
            self.restart_wanted.add(task_id)
            self.loops[task_id].cancel()


def tried_on(ctx: RunContext, task: Task) -> list[TriedEdit]:
    """The edits hilbert's loop tried on `task` and put back, in all its attempts so far (not those of
    an attempt that read a peer's message: a peer must not steer a fresh attempt through the list)."""
    found: list[TriedEdit] = []
    attempts = ctx.state.attempts.items()
    for worker in [w for w, attempt in attempts if attempt.task == task.id and not attempt.tainted_at]:
        found += [e for e in tried_edits(every_turn(ctx.store, ctx.run, worker)) if e not in found]
    return found


def _last_claim(ctx: RunContext, agent: str) -> tuple[str, str] | None:
    """The claim and evidence of the agent's last successful `finish` call, if its last tool call was one."""
    calls = ctx.store.events(run=ctx.run, agent=agent, kinds=["tool_result"])[-1:]
    if not calls or calls[0].data.get("name") != "finish" or calls[0].data.get("is_error"):
        return None
    arguments = calls[0].data.get("arguments") or {}
    return str(arguments.get("claim", "")), str(arguments.get("evidence", ""))


class HilbertLoop:
    """hilbert's agent loop as a `Worker`: the harness makes its model calls (a `ModelGrant`), the loop
    writes its own events (it needs no `emit`), and its policies — the stop gate last — act inside it,
    so a worker the gate sends back continues its conversation. `history`: the conversation to go on
    from (rebuilt from the log), else it starts from the spec's prompt."""

    def __init__(
        self,
        run: str,
        store: EventStore,
        tools: Tools,
        history: list[Message] | None = None,
        *,
        policies: Sequence[Policy] = (),
    ) -> None:
        self.run, self.store, self.tools, self.history, self.policies = run, store, tools, history, policies

    async def attempt(self, spec: TaskSpec, checkout: Checkout, grant: Grant, emit: Emit) -> AgentResult:
        if not isinstance(grant, ModelGrant):
            raise TypeError("hilbert's loop makes its model calls in the harness: it takes a ModelGrant")
        return await run_agent(
            run=self.run,
            agent=spec.worker,
            task=spec.prompt,
            model=grant.model,
            system_prompt=spec.system_prompt,
            toolbox=self.tools,
            store=self.store,
            history=self.history,
            policies=self.policies,
        )


def stop_gate(ctx: RunContext, task: Task, checkout: Checkout, *, rounds: int = 0) -> StopGate:
    """The stop gate of one attempt at `task` whose work is in `checkout` (`rounds` already judged)."""
    return StopGate(
        task,
        ctx.workspaces,
        checkout,
        ctx.record,
        git=ctx.git,
        scratch=ctx.root / "gate",
        runner=ctx.runner,
        judge=ctx.models.judge,
        heldout=ctx.heldout.get(task.id),
        panel=ctx.models.panel,
        cost=ctx.cost,
        max_rounds=ctx.settings.gate.rounds,
        gate_timeout_s=ctx.settings.timeouts.gate_s,
        differential=ctx.settings.gate.differential,
        rounds=rounds,
    )


def spec_for(ctx: RunContext, task: Task, name: Name) -> TaskSpec:
    """The worker's task spec: its prompt (the task, skills, earlier feedback, the lead's notes), as
    written: the agent loop (or, for an external worker, `run_external`) defangs what the worker reads."""
    state = ctx.state
    claims = f" (expected: {', '.join(task.claims)})" if task.claims else ""
    prompt = WORKER_TASK.format(
        id=task.id,
        title=task.title,
        description=task.description or task.title,
        verify=task.verify,
        claims=claims,
        messages=ENVELOPE_RULES,
    )
    for skill in ctx.skills:
        prompt += f"\n\nSkill `{skill.name}` ({skill.description}):\n{skill.body}"
    if task.id in state.feedback:
        prompt += f"\n\nAn earlier attempt at this task did not land:\n{state.feedback[task.id]}"
    for note in state.notes.get(task.id, []):
        prompt += f"\n\nThe lead's note: {note}"
    return TaskSpec(task, name.display, prompt, ctx.system_prompt)


async def landed(
    ctx: RunContext, task: Task, name: Name, checkout: Checkout, outcome: AttemptOutcome
) -> AttemptOutcome:
    """The outcome with its candidate: the commit the gate's last verdict accepted, fetched into the
    integration repository; recorded as `task_attempted`."""
    attempt = ctx.state.attempts.get(name.display)
    if outcome.status in ("finished", "no_finish") and attempt is not None and attempt.accepted is not None:
        ref = f"refs/hilbert/candidates/{task.id}/{name.id}"
        await ctx.workspaces.fetch_into(checkout, ctx.integration, ref)
        outcome = AttemptOutcome(outcome.status, outcome.cause, outcome.reason, ref)
    ctx.record(
        TaskAttempted(
            task=task.id,
            worker=name.display,
            status=outcome.status,
            cause=outcome.cause,
            reason=outcome.reason,
            candidate=outcome.candidate,
        )
    )
    if outcome.candidate is not None and task.id in ctx.state.held:  # it read a peer's message
        await hold(ctx, task.id)
    return outcome


async def close(ctx: RunContext, checkout: Checkout, outcome: AttemptOutcome) -> None:
    """Remove the attempt's workspace when its work is safe in the integration repository, else archive it."""
    if checkout.work_tree.exists():
        closing = ctx.closing(checkout.worker_id)
        await asyncio.shield(
            ctx.workspaces.archive_or_remove(checkout, ctx.integration, outcome.candidate, closing=closing)
        )
