"""The typed data a view of a fleet run shows (`RunView` and its parts): frozen, plain, no behaviour but
what is derived from their own fields. Built by `hilbert.views.run_view.RunLog.view`; rendered by
`hilbert.ui.report` (and later `top`, `web`). Strings are as logged: untrusted, to be escaped by the
renderer for its medium.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hilbert.fleet import events as ev
from hilbert.models.types import Usage

# How an attempt ended, as the fold has it: its candidate merged, waits in the queue (or for the person's
# decision: held), was sent back by the merge queue (a conflict, red checks), or the attempt ended without
# a candidate (not done), was stopped by the person or the cost cap, or is still running. A lead session is
# a bar of its own.
Outcome = Literal["merged", "waiting", "held", "sent back", "not done", "stopped", "running", "lead"]
RunOutcome = Literal["finished", "interrupted", "not finished"]
OUTCOMES: tuple[Outcome, ...] = (
    "merged",
    "waiting",
    "held",
    "sent back",
    "not done",
    "stopped",
    "running",
    "lead",
)


@dataclass(frozen=True)
class Summary:
    run: str
    goal: str
    outcome: RunOutcome
    tasks: int
    statuses: tuple[tuple[str, int], ...]  # task status -> how many tasks, sorted by status
    merged: tuple[str, ...]  # task ids, in the plan's order
    needs_you: tuple[tuple[str, str], ...]  # (task, why the person decides)
    cost_usd: float  # the fold's `spent_usd`: workers, lead, judge model, review panel
    unpriced: bool  # a model call on a model with no known price: the cost is a lower bound
    tokens: Usage  # every agent's, cache reads and writes apart from input
    started_at: float  # Unix seconds
    ended_at: float  # the run's `fleet_finished`, else its last event
    workers: int
    budgets: tuple[str, ...] = ()  # each cap set with what is left, and its questions (`fleet.budget_lines`)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.ended_at - self.started_at)


@dataclass(frozen=True)
class Bar:
    """One attempt on the timeline (or one lead session: `task` is "", `outcome` "lead")."""

    agent: str
    task: str
    start: float
    end: float  # for one still open: the last time the log knows
    outcome: Outcome
    open: bool  # it had not ended when the log was read
    verdicts: tuple[tuple[float, str], ...]  # the stop gate's rounds: (time, done | not_done | impossible)
    detail: str  # how it ended, or what the merge queue said of its candidate


@dataclass(frozen=True)
class SpendPoint:
    """The run's spend after one event that spent (a model call, a verdict, a review)."""

    time: float
    agent: str  # whose event it was (the judge's and the panel's: `harness`)
    cost_usd: float  # the run's total so far
    tokens: Usage  # the run's tokens so far


@dataclass(frozen=True)
class AgentSpend:
    agent: str
    cost_usd: float  # what the fold's run total grew by on this agent's events
    tokens: Usage
    turns: int
    unpriced: bool


@dataclass(frozen=True)
class Funnel:
    """The stop gate's rounds and what became of them: every round is a worker's stop the gate judged
    (`claimed`), sent back or done; `merged` counts tasks the queue landed; the queue's own send-backs
    apart."""

    claimed: int
    without_claim: int  # of those, the worker stopped without calling finish
    sent_back: int
    by_panel: int  # of those, the review panel's agreed findings
    impossible: int  # of those, the judge said the task cannot be done
    done: int
    merged: int
    conflicts: int
    rejected: int


@dataclass(frozen=True)
class ReasonGroup:
    """Why work was sent back, grouped by a typed fact: the gate step that failed (`stop gate`), how an
    attempt ended without a candidate (`attempt`), or the merge queue's kind (`merge queue`)."""

    source: Literal["stop gate", "attempt", "merge queue"]
    reason: str
    count: int
    tasks: tuple[str, ...]
    example: str


@dataclass(frozen=True)
class Retry:
    """A failed task's next step: `retried` (a fresh attempt), `escalated` (to the lead), `needs you`."""

    time: float
    task: str
    kind: Literal["retried", "escalated", "needs you"]
    decision: str
    why: str


@dataclass(frozen=True)
class Batch:
    """One batch of the merge queue, with what happened to it until the next batch started."""

    number: int
    time: float
    tasks: tuple[str, ...]
    base: str
    checks_passed: int  # builds whose checks passed (the batch's, a bisection's halves)
    checks_failed: tuple[ev.MergeChecksFailed, ...]
    bisections: tuple[ev.MergeBisect, ...]
    conflicts: tuple[ev.MergeConflict, ...]
    rejected: tuple[ev.MergeRejected, ...]
    merged: tuple[str, ...]
    requeued: tuple[str, ...]
    flaky: int


@dataclass(frozen=True)
class RunView:
    summary: Summary
    bars: tuple[Bar, ...]
    spend: tuple[SpendPoint, ...]
    agents: tuple[AgentSpend, ...]
    funnel: Funnel
    reasons: tuple[ReasonGroup, ...]
    retries: tuple[Retry, ...]
    batches: tuple[Batch, ...]
