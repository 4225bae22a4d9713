"""The fleet's events as typed records: one frozen dataclass per kind, in one registry.

Writers build a record and append it (`record(Merged(task="T1", ref=..., commit=...))`); readers turn a
stored row back into its record with `decode`. Every field has a default, and `decode` ignores keys it
does not know, so a log written by an older or newer hilbert still reads. The fold over these records
(`hilbert.fleet.state`) is the fleet's state; nothing else keeps it.

Who writes what: the harness (agent "harness": the driver, the stop gate, the merge queue, liveness,
the lead's tools), the person (agent "person": messages, stops, decisions on proposals), workers and
the lead (their messages). The agent loop's own kinds (`agent_started`, `model_call`, ...) are
`hilbert.store.kinds`; the fold reads those as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, TypeVar, dataclass_transform

from hilbert.store.event_store import Event

E = TypeVar("E", bound="FleetEvent")
EVENTS: dict[str, type[FleetEvent]] = {}
_FIELDS: dict[type[FleetEvent], frozenset[str]] = {}


@dataclass(frozen=True)
class FleetEvent:
    """A fleet event's record; `kind` is the name it is stored under."""

    kind: ClassVar[str] = ""

    def data(self) -> dict[str, Any]:
        return asdict(self)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def kind(name: str) -> Callable[[type[E]], type[E]]:
    """Make the class a frozen dataclass and register it under its kind."""

    def register(cls: type[E]) -> type[E]:
        cls = dataclass(frozen=True)(cls)
        cls.kind = name
        EVENTS[name] = cls
        return cls

    return register


def decode(event: Event) -> FleetEvent | None:
    """The record of a stored fleet event; None for a kind that is not the fleet's."""
    cls = EVENTS.get(event.kind)
    if cls is None:
        return None
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = frozenset(f.name for f in fields(cls))
    data = event.data
    return cls(**(data if known.issuperset(data) else {k: v for k, v in data.items() if k in known}))


# -- the run ---------------------------------------------------------------------------------------


@kind("fleet_started")
class FleetStarted(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # the whole plan (`Plan.model_dump(mode="json")`)
    repo: str = ""  # the person's repository, read once
    base: str = ""  # the commit the run started from
    heldout_root: str = ""  # the folder the plan's `heldout:` paths are relative to
    workers: int = 0
    test_command: str = ""
    max_cost_usd: float = 0.0
    model: str = ""
    integration: str = ""
    sandbox: str = ""
    mark: str = ""  # every command of the run carries it (its leftovers are found by it)
    settings: dict[str, Any] = field(default_factory=dict)  # what may change on resume, as the run started
    pid: int = 0  # so a view can tell a run whose process died
    into: str = ""  # `--into BRANCH`: the person's branch the result goes to ("": hilbert/<run>)
    host: str = ""


@kind("fleet_resumed")
class FleetResumed(FleetEvent):
    pid: int = 0
    host: str = ""
    mark: str = ""
    changed: dict[str, Any] = field(default_factory=dict)  # setting -> [before, now]
    settings: dict[str, Any] = field(default_factory=dict)
    killed: list[int] = field(
        default_factory=list
    )  # the dead run's processes, killed before anything restarted
    into: str = ""  # `--into BRANCH` given to this resume ("": as before)


@kind("fleet_interrupted")
class FleetInterrupted(FleetEvent):
    why: str = ""


@kind("fleet_finished")
class FleetFinished(FleetEvent):
    states: dict[str, str] = field(default_factory=dict)
    tip: str = ""
    stuck: dict[str, str] = field(default_factory=dict)


@kind("crash_point")
class CrashPoint(FleetEvent):
    """Test only: the orchestrator kills itself right after this event (`HILBERT_CRASH_AT`)."""

    point: str = ""


# -- tasks and attempts ----------------------------------------------------------------------------


@kind("task_state")
class TaskStateChanged(FleetEvent):
    task: str = ""
    status: str = "pending"
    attempts: int = 0
    worker: str | None = None
    reopened: int = 0


@kind("task_started")
class TaskStarted(FleetEvent):
    task: str = ""
    worker: str = ""  # display name
    worker_id: str = ""
    base: str = ""
    workspace: str = ""


@kind("attempt_resumed")
class AttemptResumed(FleetEvent):
    task: str = ""
    worker: str = ""
    how: str = ""  # continued | gate_rerun | fetch | restarted
    why: str = ""


@kind("task_attempted")
class TaskAttempted(FleetEvent):
    task: str = ""
    worker: str = ""
    status: str = ""
    cause: str = ""
    reason: str = ""
    candidate: str | None = None  # the ref its verified commit was fetched to


@kind("task_retried")
class TaskRetried(FleetEvent):
    task: str = ""
    why: str = ""
    decision: str = ""


@kind("task_escalated")
class TaskEscalated(FleetEvent):
    task: str = ""
    why: str = ""
    decision: str = ""
    with_tasks: list[str] = field(default_factory=list)  # escalated together: it fails only with these


@kind("task_needs_you")
class TaskNeedsYou(FleetEvent):  # no lead will answer its escalation (`hilbert.fleet.person`)
    task: str = ""
    why: str = ""  # why the person, not the lead
    evidence: str = ""  # why its last attempt did not land


@kind("task_retry_asked")
class TaskRetryAsked(FleetEvent):  # the person's `hilbert retry` (agent "person"): pending, fresh attempts
    task: str = ""
    edited: dict[str, Any] = field(default_factory=dict)  # the task as the person edited it ({}: as it was)


@kind("task_stopped")
class TaskStopped(FleetEvent):
    task: str = ""
    why: str = ""


@kind("task_error")
class TaskError(FleetEvent):
    task: str = ""
    error: str = ""


# -- the stop gate and the panel -------------------------------------------------------------------


@kind("gate_step")
class GateStep(FleetEvent):
    task: str = ""
    worker: str = ""  # the worker's id
    commit: str = ""
    round: int = 0
    step: str = ""
    passed: bool = False
    summary: str = ""
    findings: list[str] = field(default_factory=list)
    output: str = ""


@kind("gate_running")
class GateRunning(FleetEvent):
    task: str = ""
    worker: str = ""
    commit: str = ""
    round: int = 0
    step: str = ""
    elapsed_s: float = 0.0


@kind("gate_verdict")
class GateVerdict(FleetEvent):
    """The round's last word, after the panel: `done` means `commit` is the attempt's candidate."""

    task: str = ""
    worker: str = ""
    commit: str = ""
    round: int = 0
    verdict: str = ""  # done | not_done | impossible
    reasons: list[str] = field(default_factory=list)
    checks_passed: bool = False
    claimed: bool = False
    model: str | None = None
    model_cost_usd: float = 0.0
    panel: str | None = None  # the panel's summary when it sent the work back


@kind("panel_reviewed")
class PanelReviewed(FleetEvent):
    task: str = ""
    worker: str = ""
    commit: str = ""
    round: int = 0
    summary: str = ""
    send_back: bool = False
    reasons: list[str] = field(default_factory=list)
    reviews: list[Any] = field(default_factory=list)
    agreed: list[Any] = field(default_factory=list)
    pairs: list[Any] = field(default_factory=list)
    complete: bool = True
    errors: list[str] = field(default_factory=list)
    cost_usd: float = 0.0


@kind("panel_skipped")
class PanelSkipped(FleetEvent):
    task: str = ""
    worker: str = ""
    commit: str = ""
    round: int = 0
    why: str = ""


@kind("panel_agreement")
class PanelAgreement(FleetEvent):
    pairs: list[Any] = field(default_factory=list)
    reviews: int = 0


# -- liveness and workspaces -----------------------------------------------------------------------


@kind("worker_stuck")
class WorkerStuck(FleetEvent):
    task: str = ""
    worker: str = ""
    quiet_s: float = 0.0


@kind("worker_hung")
class WorkerHung(FleetEvent):
    task: str = ""
    worker: str = ""
    quiet_s: float = 0.0


@kind("worker_restarted")
class WorkerRestarted(FleetEvent):
    task: str = ""
    worker: str = ""
    why: str = ""
    restart: int = 0
    kept: int = 0


@kind("liveness_error")
class LivenessError(FleetEvent):
    error: str = ""


@kind("workspace_closed")
class WorkspaceClosed(FleetEvent):
    worker: str = ""  # the worker's id
    message: str = ""


@kind("workspaces_fallback")
class WorkspacesFallback(FleetEvent):
    strategy: str = ""
    why: str = ""


# -- the merge queue -------------------------------------------------------------------------------


@kind("merge_batch_started")
class MergeBatchStarted(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    base: str = ""


@kind("merge_checks_passed")
class MergeChecksPassed(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    commit: str = ""
    commands: list[str] = field(default_factory=list)


@kind("merge_checks_failed")
class MergeChecksFailed(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    commit: str = ""
    command: str = ""
    exit: int = 0
    timed_out: bool = False
    output: str = ""
    confirmed: bool = False
    new_failures: list[str] = field(default_factory=list)  # tests failing here that pass at its base


@kind("merge_checks_baseline")
class MergeChecksBaseline(FleetEvent):
    commit: str = ""
    base: str = ""
    still_failing: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)


@kind("merge_bisect")
class MergeBisect(FleetEvent):
    suspects: list[str] = field(default_factory=list)
    testing: list[str] = field(default_factory=list)
    base: str = ""


@kind("merge_landing")
class MergeLanding(FleetEvent):
    """Written before the integration ref moves from `old` to `commit`: the intent, reconciled at resume."""

    tasks: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    commit: str = ""
    old: str = ""


@kind("merged")
class Merged(FleetEvent):
    task: str = ""
    ref: str = ""
    commit: str = ""


@kind("merge_reconciled")
class MergeReconciled(FleetEvent):
    """At resume: the log and the integration ref told different stories; what was done about it."""

    tasks: list[str] = field(default_factory=list)
    commit: str = ""
    how: str = ""  # ref_moved_unlogged (merged now logged) | landing_lost (requeued) | merge_lost (requeued)


@kind("merge_rejected")
class MergeRejected(FleetEvent):
    task: str = ""
    ref: str = ""
    command: str = ""
    exit: int = 0
    output: str = ""
    tested_commit: str = ""
    with_tasks: list[str] = field(default_factory=list)  # it passed alone: it fails only together with these
    new_failures: list[str] = field(default_factory=list)  # tests the tested commit fails, its base passes


@kind("merge_conflict")
class MergeConflict(FleetEvent):
    task: str = ""
    ref: str = ""
    base: str = ""
    files: list[str] = field(default_factory=list)
    hunks: str = ""


@kind("merge_requeued")
class MergeRequeued(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    base: str = ""
    reason: str = ""


@kind("merge_error")
class MergeError(FleetEvent):
    error: str = ""


@kind("flaky_test")
class FlakyTest(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    commit: str = ""
    command: str = ""
    first_exit: int = 0
    first_output: str = ""
    second_output: str = ""


@kind("final_base")
class FinalBase(FleetEvent):  # the whole suite at the run's base, once (`hilbert.fleet.final_check`)
    base: str = ""
    command: str = ""
    ok: bool = True
    failing: list[str] = field(default_factory=list)
    gathered: bool = False


@kind("final_checked")
class FinalChecked(FleetEvent):  # ... and at the tip, on a clean checkout: what failed, sorted
    round: int = 0
    base: str = ""
    tip: str = ""
    command: str = ""
    new: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    preexisting: list[str] = field(default_factory=list)
    gathered: bool = False
    output: str = ""
    repair: str = ""  # the repair task it added ("": none)
    repair_task: dict[str, Any] = field(default_factory=dict)  # ... as the plan holds it (the fold adds it)
    error: str = ""  # a harness step failed: nothing was compared
    passing: list[str] = field(default_factory=list)  # given-up tasks whose check passes at the tip


# -- the lead and the person -----------------------------------------------------------------------


@kind("lead_consulted")
class LeadConsulted(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    session: int = 0
    held: list[str] = field(default_factory=list)  # held candidates' proposals shown (`fleet.tainted`)


@kind("lead_answered")
class LeadAnswered(FleetEvent):
    status: str = ""
    error: str | None = None
    still_escalated: list[str] = field(default_factory=list)


@kind("lead_action")
class LeadAction(FleetEvent):
    action: str = ""  # reassign | split_task | add_task | mark_impossible
    task: str = ""
    note: str | None = None
    reason: str | None = None
    into: list[str] | None = None
    worker_messages_read: list[dict[str, Any]] | None = None  # the session had read a worker's message
    proposal: str | None = None  # the held proposal this applies, once the person approved it
    approved_by: str | None = None
    notes: dict[str, str] = field(default_factory=dict)  # task -> the lead's note for its next worker

    def data(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@kind("plan_changed")
class PlanChanged(FleetEvent):
    tasks: list[str] = field(default_factory=list)
    added: list[dict[str, Any]] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)  # the whole new plan
    path: str = ""  # the PLAN.md written


@kind("taint_snapshot")
class TaintSnapshot(FleetEvent):
    """The work tree of `worker`'s attempt at `task` as it was before the first peer's message reached
    it, committed as `commit` (empty, with `why`, when that failed): a held candidate's diff since."""

    task: str = ""
    worker: str = ""
    commit: str = ""
    why: str = ""


MERGE_HELD = "merge"  # a `proposal_held` action: a tainted attempt's candidate (`hilbert.fleet.tainted`)


@kind("proposal_held")
class ProposalHeld(FleetEvent):
    id: str = ""
    action: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    added: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    worker_messages: list[dict[str, Any]] = field(default_factory=list)
    session: int = 0


@kind("proposal_approved")
class ProposalApproved(FleetEvent):
    id: str = ""


@kind("proposal_rejected")
class ProposalRejected(FleetEvent):
    id: str = ""
    why: str = ""


@kind("proposal_applied")
class ProposalApplied(FleetEvent):
    id: str = ""
    action: str = ""


@kind("proposal_stale")
class ProposalStale(FleetEvent):
    id: str = ""
    why: str = ""


@dataclass(frozen=True)
class MessageEvent(FleetEvent):
    """A message to an agent (`hilbert.fleet.inbox`): signed when the run has a key."""

    run: str = ""
    sender: str = ""
    role: str = ""
    to: str = ""
    text: str = ""
    hop: int = 0
    signature: str = ""


@kind("person_message")
class PersonMessage(MessageEvent):
    pass


@kind("lead_message")
class LeadMessage(MessageEvent):
    pass


@kind("worker_nudged")
class WorkerNudged(MessageEvent):
    pass


@kind("agent_message")
class AgentMessage(MessageEvent):
    pass


@kind("message_refused")
class MessageRefused(FleetEvent):
    sender: str = ""
    to: str = ""
    why: str = ""


@kind("message_rejected")
class MessageRejected(FleetEvent):
    id: int = 0
    to: str = ""
    why: str = ""


@kind("stop_requested")
class StopRequested(FleetEvent):
    to: str = "*"
    why: str = ""  # when the harness asked (the disk filled): what the halted agent's log says


# -- budgets (`hilbert.fleet.budget`) --------------------------------------------------------------


@kind("budget_asked")
class BudgetAsked(FleetEvent):
    """A soft cap was reached: the work it covers waits until the person raises it or refuses."""

    id: str = ""  # B1, B2, ... (one counter with `budget_halted`)
    cap: str = ""  # the setting: task_usd, run_tokens, rate_usd_per_hour, ...
    scope: str = ""  # the task's id, the agent's name, "" for the run (and a rate)
    limit: float = 0.0  # the cap as it was (raises included)
    spent: float = 0.0
    agent: str = ""  # the agent that reached it first
    task: str = ""


@kind("budget_halted")
class BudgetHalted(BudgetAsked):
    """A hard cap was reached: the work it covers halts, kept; a raise lets `hilbert retry` go on."""


@kind("budget_waiting")
class BudgetWaiting(FleetEvent):
    """A worker's budget guard began to wait on question `id` before its next model call: from here on
    it spends nothing until the person answers (until then a worker the question covers may still have
    a model call in flight, and reads `working`, never `paused`)."""

    id: str = ""
    agent: str = ""


@kind("budget_raised")
class BudgetRaised(FleetEvent):  # the person's `hilbert approve B1 [--by N]`
    id: str = ""
    by: float = 0.0


@kind("budget_refused")
class BudgetRefused(FleetEvent):  # the person's `hilbert reject B1`: the waiting work halts, kept
    id: str = ""
    why: str = ""
