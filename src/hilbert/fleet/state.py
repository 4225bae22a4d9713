"""The fleet's state as a fold of its event log: `apply(state, event) -> state`, and `Fold`, which
applies only the events newer than the last it saw.

`FleetState` is everything the driver decides from and every view shows: the plan, each task's state,
each attempt (its worker, base, workspace, gate rounds, last verdict and candidate, how it ended),
why a task's last attempt did not land, the lead's notes, which escalations the lead was shown, the
merge queue (candidates waiting, a landing not yet confirmed), each agent's turns, tokens, spend and
status, the run's spend (per agent and task too, with the budgets' questions: `hilbert.fleet.spend`),
stop requests, the orchestrator's pid and host. Nothing else keeps these facts: the driver,
`hilbert status`, `ask`, `logs` and later views each hold a `Fold`.

`apply` changes `state` in place and returns it: a fresh copy per event would cost O(tasks) for every
event of a million-event log. A state belongs to one reader. Kinds it does not know change nothing.
What must not live here: decisions (the scheduler's, the queue's) and anything that does I/O but
reading the log.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, replace
from typing import Any

from hilbert.fleet import events as ev
from hilbert.fleet import spend as sp
from hilbert.fleet.inbox import EVERYONE, LEAD
from hilbert.fleet.plan import Plan, Task
from hilbert.fleet.scheduler import TaskState
from hilbert.models.types import Usage
from hilbert.store.event_store import Event, EventStore
from hilbert.store.folding import catch_up

RETRYABLE = frozenset({"needs_you", "escalated", "impossible"})  # what `hilbert retry` reopens
SHOWN_HELD = "held:"  # in `FleetState.shown`, before a held candidate's proposal id: shown to the lead

HARNESS = "harness"
PERSON = "person"


@dataclass
class AttemptView:
    """One worker's attempt at a task (a worker has exactly one)."""

    task: str
    worker: str  # display name
    worker_id: str
    base: str = ""
    workspace: str = ""
    rounds: int = 0  # gate rounds with a verdict
    gate_open: int = 0  # a round the gate started (a step ran) without a verdict yet: interrupted
    verdict: ev.GateVerdict | None = None  # the last one
    candidate: str | None = None  # the ref its verified commit was fetched to
    ended: ev.TaskAttempted | None = None
    closed: bool = False  # its workspace was removed or archived
    landed: str | None = None  # merged | conflict | rejected
    landed_why: str = ""  # a conflict's hunks, a rejection's output
    landed_with: list[str] = field(default_factory=list)  # rejected: the tasks it fails only together with
    joined: int = 0  # the id of its `task_started`: broadcasts and stops after it are its own
    peer_read: list[tuple[str, int]] = field(default_factory=list)  # peers' messages shown: (sender, id)
    tainted_at: int = 0  # the first `message_injected` showing one: its candidate is held

    @property
    def accepted(self) -> str | None:
        """The commit the gate accepted as this attempt's candidate (its last verdict is done)."""
        return self.verdict.commit if self.verdict and self.verdict.verdict == "done" else None


@dataclass
class AgentView:
    """One agent's progress, as `hilbert status` shows it."""

    status: str = "running"
    task: str | None = None
    model: str | None = None
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    tokens: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # in, out, cache read, cache write
    cost_usd: float = 0.0
    started_at: float = 0.0
    last_event_at: float = 0.0
    claim: str | None = None
    reason: str | None = None
    cause: str = ""
    finishing: bool = False  # its last tool call was a successful `finish`: the harness is judging
    external: bool = False  # not hilbert's loop (`fleet.seams`): no model calls of its own in the log
    delivered: int = 0  # the id of the last message its inbox delivered (`Inject.source`)
    unpriced: bool = False  # a model call on a model with no known price: its cost is not known
    calling: bool = False  # its next step is a model call (in flight, or its policies before it)
    waiting_on: str = ""  # the budget question its guard waits on (`budget_waiting`) since its last call

    @property
    def usage(self) -> Usage:
        return Usage(*self.tokens)

    def add(self, usage: dict[str, int], cost_usd: float) -> None:
        tokens = self.tokens
        tokens[0] += usage.get("input_tokens", 0)
        tokens[1] += usage.get("output_tokens", 0)
        tokens[2] += usage.get("cache_read_tokens", 0)
        tokens[3] += usage.get("cache_write_tokens", 0)
        self.cost_usd += cost_usd


@dataclass
class FleetState:
    run: str
    started: ev.FleetStarted | None = None
    resumed: list[ev.FleetResumed] = field(default_factory=list)
    interrupted: str | None = None  # why the last orchestrator stopped early (Ctrl-C)
    finished: ev.FleetFinished | None = None
    plan: Plan | None = None
    states: dict[str, TaskState] = field(default_factory=dict)
    attempts: dict[str, AttemptView] = field(default_factory=dict)  # worker display name -> attempt
    current: dict[str, str] = field(default_factory=dict)  # task -> the worker of its latest attempt
    feedback: dict[str, str] = field(default_factory=dict)  # task -> why its last attempt did not land
    notes: dict[str, list[str]] = field(default_factory=dict)  # task -> the lead's notes
    shown: set[str] = field(default_factory=set)  # escalations and SHOWN_HELD + P3 a lead was given
    stopped: set[str] = field(default_factory=set)  # stopped by the person or the cost cap
    needs_you: dict[str, ev.TaskNeedsYou] = field(default_factory=dict)  # task -> why the person decides
    retried: set[str] = field(default_factory=set)  # reopened by `hilbert retry`, not started since
    lead_sessions: int = 0
    lead_open: list[str] | None = None  # the tasks of a lead session that has not answered
    lead_read: int = 0  # the last message delivered to a lead session that answered
    lead_answered_at: int = 0  # the id of that session's `lead_answered`
    lead_answer: ev.LeadAnswered | None = None  # ... and the event itself
    queue: dict[str, str] = field(default_factory=dict)  # task -> candidate ref waiting to merge
    held: dict[str, str] = field(default_factory=dict)  # task -> a tainted candidate waiting for a decision
    held_as: dict[str, str] = field(default_factory=dict)  # its `merge` proposal's id -> task
    peer_messages: dict[int, str] = field(default_factory=dict)  # an `agent_message`'s id -> its sender
    landing: ev.MergeLanding | None = None  # the last intent whose `merged` events are not all in
    merged: dict[str, ev.Merged] = field(default_factory=dict)
    final_base: ev.FinalBase | None = None  # the whole suite at base (`hilbert.fleet.final_check`)
    final_checks: list[ev.FinalChecked] = field(default_factory=list)  # ... and at the tip, each round
    agents: dict[str, AgentView] = field(default_factory=dict)
    spent_usd: float = 0.0
    spend: sp.Spend = field(default_factory=sp.Spend)  # per run, agent and task; budgets' questions
    stops: set[str] = field(default_factory=set)  # whom the person asked to stop ("*": everyone)
    workers_used: list[str] = field(default_factory=list)  # worker ids, in order
    pid: int = 0
    host: str = ""
    last_id: int = 0

    # -- what views and the driver ask --------------------------------------------------------------

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the run goes on with now (as started, with each resume's changes)."""
        now = dict(self.started.settings) if self.started else {}
        for resumed in self.resumed:
            now.update(resumed.settings)
        return now

    @property
    def into(self) -> str | None:
        """The person's branch the result goes to (`--into`, the latest given), None: hilbert/<run>."""
        given = [self.started.into if self.started else "", *(r.into for r in self.resumed)]
        return next((branch for branch in reversed(given) if branch), None)

    def task(self, task_id: str) -> Task:
        """The plan's task `task_id` (the plan as the lead last changed it)."""
        assert self.plan is not None
        return next(t for t in self.plan.tasks if t.id == task_id)

    def unanswered(self) -> list[str]:
        """Escalated tasks no lead session was given yet (and not the person's or the budget's)."""
        hidden = self.shown | self.stopped
        return [t for t, s in self.states.items() if s.status == "escalated" and t not in hidden]

    def running_workers(self) -> dict[str, str]:
        """task -> the display name of the worker holding it now."""
        return {
            task: worker
            for task, worker in self.current.items()
            if self.states.get(task, TaskState(task)).status in ("running", "verifying")
        }

    def process_alive(self) -> bool | None:
        """Whether the orchestrator that last wrote the log is still running (None: cannot tell here)."""
        if self.finished is not None:
            return False
        if not self.pid or self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def apply(state: FleetState, event: Event) -> FleetState:
    """Fold one committed event into `state` (in place) and return it."""
    state.last_id = max(state.last_id, event.id)
    if event.kind in sp.KINDS:  # what the run, its agents and tasks spent (`fleet.spend`)
        attempt = state.attempts.get(event.agent)
        sp.observe(state.spend, event, attempt.task if attempt is not None else None)
    else:
        state.spend.last_time = event.time
    agent = _AGENT_KINDS.get(event.kind)
    if agent is not None:
        agent(state, event)
        return state
    record = ev.decode(event)
    if isinstance(record, ev.BudgetRaised | ev.BudgetRefused) and event.agent != PERSON:
        return state  # only the person answers a budget's question
    if record is not None:
        handler = _HANDLERS.get(type(record))
        if handler is not None:
            handler(state, record)
    return state


class Fold:
    """A fold over one run's log that catches up incrementally: `catch_up()` applies only the events
    committed since the last call (by any process)."""

    def __init__(self, store: EventStore, run: str) -> None:
        self.store, self.state = store, FleetState(run)

    def catch_up(self) -> FleetState:
        return catch_up(self.store, self.state, apply)


# -- the agents' own kinds -------------------------------------------------------------------------


def _agent(state: FleetState, event: Event) -> AgentView:
    view = state.agents.get(event.agent)
    if view is None:
        view = state.agents[event.agent] = AgentView(started_at=event.time)
    view.last_event_at = event.time
    return view


def _agent_started(state: FleetState, event: Event) -> None:
    view = _agent(state, event)
    view.status, view.claim, view.reason, view.finishing = "running", None, None, False
    view.task, view.model = event.data.get("task"), event.data.get("model")
    view.external = bool(event.data.get("external"))
    view.calling, view.waiting_on = True, ""


def _model_call(state: FleetState, event: Event) -> None:
    view = _agent(state, event)
    view.turns += 1
    view.calling, view.waiting_on = False, ""  # its tools run now
    data = event.data
    cost = float(data.get("cost_usd") or 0.0)
    view.add(data.get("usage") or {}, cost)
    priced = data.get("priced")  # absent in logs written before it was recorded: a zero cost says so
    usage = data.get("usage") or {}
    view.unpriced |= priced is False or (priced is None and not cost and any(usage.values()))
    view.model = view.model or data.get("model")
    state.spent_usd += cost


def _tool_result(state: FleetState, event: Event) -> None:
    view = _agent(state, event)
    view.tool_calls += 1
    view.tool_errors += bool(event.data.get("is_error"))
    view.finishing = event.data.get("name") == "finish" and not event.data.get("is_error")
    view.calling = not view.finishing


def _compacted(state: FleetState, event: Event) -> None:
    view = _agent(state, event)
    for call in event.data.get("summary_calls") or ():
        cost = float(call.get("cost_usd") or 0.0)
        view.add(call.get("usage") or {}, cost)
        state.spent_usd += cost


def _agent_stopped(state: FleetState, event: Event) -> None:
    view = _agent(state, event)
    data = event.data
    view.status, view.claim, view.reason = (
        str(data.get("status", "stopped")),
        data.get("claim"),
        data.get("reason"),
    )
    view.cause, view.finishing, view.calling = str(data.get("cause") or ""), False, False
    view.waiting_on = ""
    if view.external:  # a worker that is not hilbert's loop logs no model calls: its spend is here
        cost = float(data.get("cost_usd") or 0.0)
        view.add(data.get("usage") or {}, cost)
        view.turns += int(data.get("turns") or 0)
        state.spent_usd += cost


def _touch(state: FleetState, event: Event) -> None:
    _agent(state, event)


def _injected(state: FleetState, event: Event) -> None:
    view = _agent(state, event)
    source = int(event.data.get("source") or 0)
    view.delivered = max(view.delivered, source)
    view.calling = True
    sender = state.peer_messages.get(source)
    attempt = state.attempts.get(event.agent)
    if sender is not None and sender != event.agent and attempt is not None and attempt.ended is None:
        attempt.peer_read.append((sender, source))  # a worker's message reached another worker
        attempt.tainted_at = attempt.tainted_at or event.id


_AGENT_KINDS = {
    "agent_started": _agent_started,
    "model_call": _model_call,
    "tool_result": _tool_result,
    "context_compacted": _compacted,
    "agent_stopped": _agent_stopped,
    "model_error": _touch,
    "message_injected": _injected,
    "policy_action": _touch,
}


# -- the fleet's kinds -----------------------------------------------------------------------------


def _plan(state: FleetState, data: dict[str, Any]) -> None:
    if data:
        state.plan = Plan.model_validate(data)
        for task in state.plan.tasks:
            state.states.setdefault(task.id, TaskState(task.id))


def _started(state: FleetState, e: ev.FleetStarted) -> None:
    state.started, state.pid, state.host = e, e.pid, e.host
    _plan(state, e.plan)


def _resumed(state: FleetState, e: ev.FleetResumed) -> None:
    state.resumed.append(e)
    state.pid, state.host, state.interrupted = e.pid, e.host, None
    state.finished = None  # a finished run resumed for a held candidate the person decided on
    if state.lead_open is not None:  # the session died with its process: its tasks go to a new one
        state.shown.difference_update(state.lead_open)
        state.lead_open = None


def _interrupted(state: FleetState, e: ev.FleetInterrupted) -> None:
    state.interrupted = e.why


def _finished(state: FleetState, e: ev.FleetFinished) -> None:
    state.finished = e


def _task_state(state: FleetState, e: ev.TaskStateChanged) -> None:
    state.states[e.task] = TaskState(e.task, e.status, e.attempts, e.worker, e.reopened)  # type: ignore[arg-type]
    if e.status != "escalated":
        state.shown.discard(e.task)  # escalated again later, the lead hears of it again
    if e.status != "needs_you":
        state.needs_you.pop(e.task, None)  # the lead or the person moved it on: that reason is old
    if e.status != "verifying":
        state.queue.pop(e.task, None)
        state.held.pop(e.task, None)


def _task_started(state: FleetState, e: ev.TaskStarted) -> None:
    state.retried.discard(e.task)
    attempt = AttemptView(e.task, e.worker, e.worker_id, e.base, e.workspace, joined=state.last_id)
    state.attempts[e.worker] = attempt
    state.current[e.task] = e.worker
    state.workers_used.append(e.worker_id)


def _attempted(state: FleetState, e: ev.TaskAttempted) -> None:
    attempt = _attempt_of(state, e.task, e.worker)
    if attempt is not None:
        attempt.ended, attempt.candidate = e, e.candidate
    if e.candidate and attempt is not None and attempt.tainted_at:
        state.held[e.task] = e.candidate  # not the queue's until a decision (`hilbert.fleet.tainted`)
    elif e.candidate:
        state.queue[e.task] = e.candidate


def _attempt_of(state: FleetState, task: str, worker: str) -> AttemptView | None:
    found = state.attempts.get(worker)
    if found is None:  # the gate and workspaces name a worker by its id
        found = next((a for a in state.attempts.values() if a.worker_id == worker and a.task == task), None)
    return found


def _gate_step(state: FleetState, e: ev.GateStep | ev.GateRunning) -> None:
    attempt = _attempt_of(state, e.task, e.worker)
    if attempt is not None and e.round > attempt.rounds:
        attempt.gate_open = e.round


def _verdict(state: FleetState, e: ev.GateVerdict) -> None:
    attempt = _attempt_of(state, e.task, e.worker)
    if attempt is not None:
        attempt.verdict, attempt.rounds, attempt.gate_open = e, e.round, 0
    state.spent_usd += e.model_cost_usd


def _panel(state: FleetState, e: ev.PanelReviewed) -> None:
    state.spent_usd += e.cost_usd


def _why(state: FleetState, e: ev.TaskRetried | ev.TaskEscalated) -> None:
    state.feedback[e.task] = e.why


def _stopped(state: FleetState, e: ev.TaskStopped) -> None:
    state.stopped.add(e.task)


def _closed(state: FleetState, e: ev.WorkspaceClosed) -> None:
    if e.worker not in state.workers_used:  # a name whose workspace was ever closed is never given again
        state.workers_used.append(e.worker)
    attempt = next((a for a in state.attempts.values() if a.worker_id == e.worker), None)
    if attempt is not None:
        attempt.closed = True


def _landing(state: FleetState, e: ev.MergeLanding) -> None:
    state.landing = e


def _merged(state: FleetState, e: ev.Merged) -> None:
    state.merged[e.task] = e
    _landed(state, e.task, e.ref, "merged")
    if state.landing is not None and all(t in state.merged for t in state.landing.tasks):
        state.landing = None


def _landed(state: FleetState, task: str, ref: str, how: str | None, why: str = "", *together: str) -> None:
    state.queue.pop(task, None)
    worker_id = ref.rsplit("/", 1)[-1]
    attempt = next((a for a in state.attempts.values() if a.worker_id == worker_id and a.task == task), None)
    if attempt is not None:
        attempt.landed, attempt.landed_why, attempt.landed_with = how, why, list(together)


def _reconciled(state: FleetState, e: ev.MergeReconciled) -> None:
    if e.how in ("landing_lost", "merge_lost"):
        state.landing = None
        for task in e.tasks:
            lost = state.merged.pop(task, None)
            if lost is not None:  # its merge is not on the branch: the candidate waits again
                _landed(state, task, lost.ref, None)
                state.queue[task] = lost.ref


def _rejected(state: FleetState, e: ev.MergeRejected | ev.MergeConflict) -> None:
    if isinstance(e, ev.MergeRejected):
        _landed(state, e.task, e.ref, "rejected", e.output, *e.with_tasks)
    else:
        _landed(state, e.task, e.ref, "conflict", e.hunks)


def _consulted(state: FleetState, e: ev.LeadConsulted) -> None:
    state.lead_open = [*e.tasks, *(SHOWN_HELD + proposal for proposal in e.held)]
    state.shown.update(state.lead_open)
    state.lead_sessions = max(state.lead_sessions, e.session)


def _answered(state: FleetState, e: ev.LeadAnswered) -> None:
    state.lead_open, state.lead_answer = None, e
    lead = state.agents.get(LEAD)
    state.lead_read = lead.delivered if lead else state.lead_read
    state.lead_answered_at = state.last_id


def _lead_action(state: FleetState, e: ev.LeadAction) -> None:
    for task, note in e.notes.items():
        state.notes.setdefault(task, []).append(note)


def _plan_changed(state: FleetState, e: ev.PlanChanged) -> None:
    _plan(state, e.plan)


def _final(state: FleetState, e: ev.FinalBase | ev.FinalChecked) -> None:
    if isinstance(e, ev.FinalBase):
        state.final_base = e
        return
    state.final_checks.append(e)
    if e.repair_task and state.plan is not None and e.repair not in state.states:  # its repair task
        task = Task.model_validate(e.repair_task)
        state.plan = state.plan.model_copy(update={"tasks": (*state.plan.tasks, task)})
        state.states[task.id] = TaskState(task.id)


def _needs_you(state: FleetState, e: ev.TaskNeedsYou) -> None:
    state.needs_you[e.task] = e


def _retry_asked(state: FleetState, e: ev.TaskRetryAsked) -> None:
    """The person's `hilbert retry`: the task pending with fresh attempts (as they edited it), and a run
    that had ended not ended any more (`hilbert retry` resumes it)."""
    before = state.states.get(e.task)
    if state.plan is None or before is None or before.status not in RETRYABLE:
        return
    if before.status == "escalated" and e.task in (state.lead_open or ()):
        return  # a lead session is deciding it now
    if e.edited:
        try:
            edited = Task.model_validate({**e.edited, "id": e.task})
        except ValueError:  # `hilbert retry --edit` validates it; a log edited by hand does not count
            edited = None
        if edited is not None:
            tasks = tuple(edited if t.id == e.task else t for t in state.plan.tasks)
            state.plan = state.plan.model_copy(update={"tasks": tasks})
    state.states[e.task] = TaskState(e.task, "pending", 0, None, before.reopened + 1)
    state.stopped.discard(e.task)
    state.shown.discard(e.task)
    state.needs_you.pop(e.task, None)
    state.finished = None  # a run that had ended has work again: it is resumed for it
    state.stops.discard(EVERYONE)  # the person's stop of the whole run: they asked it to go on
    state.retried.add(e.task)


def _stop(state: FleetState, e: ev.StopRequested) -> None:
    state.stops.add(e.to)


def _peer_message(state: FleetState, e: ev.AgentMessage) -> None:
    state.peer_messages[state.last_id] = e.sender


def _proposal(state: FleetState, e: ev.ProposalHeld | ev.ProposalApplied) -> None:
    if isinstance(e, ev.ProposalHeld) and e.action == ev.MERGE_HELD:
        state.held_as[e.id] = str(e.detail.get("task", ""))
    elif e.action == ev.MERGE_HELD and (task := state.held_as.get(e.id, "")) in state.held:
        state.queue[task] = state.held.pop(task)  # approved: it goes to the merge queue


def _budget_waiting(state: FleetState, e: ev.BudgetWaiting) -> None:
    view = state.agents.get(e.agent)
    if view is not None and view.status == "running":
        view.waiting_on = e.id


_HANDLERS: dict[type, Any] = {
    ev.FleetStarted: _started,
    ev.FleetResumed: _resumed,
    ev.FleetInterrupted: _interrupted,
    ev.FleetFinished: _finished,
    ev.TaskStateChanged: _task_state,
    ev.TaskStarted: _task_started,
    ev.TaskAttempted: _attempted,
    ev.GateStep: _gate_step,
    ev.GateRunning: _gate_step,
    ev.GateVerdict: _verdict,
    ev.PanelReviewed: _panel,
    ev.TaskRetried: _why,
    ev.TaskEscalated: _why,
    ev.TaskStopped: _stopped,
    ev.WorkspaceClosed: _closed,
    ev.MergeLanding: _landing,
    ev.Merged: _merged,
    ev.MergeReconciled: _reconciled,
    ev.MergeRejected: _rejected,
    ev.MergeConflict: _rejected,
    ev.LeadConsulted: _consulted,
    ev.LeadAnswered: _answered,
    ev.LeadAction: _lead_action,
    ev.PlanChanged: _plan_changed,
    ev.StopRequested: _stop,
    ev.FinalBase: _final,
    ev.TaskNeedsYou: _needs_you,
    ev.TaskRetryAsked: _retry_asked,
    ev.FinalChecked: _final,
    ev.AgentMessage: _peer_message,
    ev.ProposalHeld: _proposal,
    ev.ProposalApplied: _proposal,
    ev.BudgetAsked: lambda state, e: sp.asked(state.spend, e),
    ev.BudgetHalted: lambda state, e: sp.asked(state.spend, e),
    ev.BudgetWaiting: lambda state, e: _budget_waiting(state, e),
    ev.BudgetRaised: lambda state, e: sp.raised(state.spend, e),
    ev.BudgetRefused: lambda state, e: sp.refused(state.spend, e),
}


def with_state(state: FleetState, task: str, **changes: Any) -> TaskState:
    """`task`'s state with `changes` (not yet recorded: record a `TaskStateChanged` to make it so)."""
    return replace(state.states[task], **changes)
