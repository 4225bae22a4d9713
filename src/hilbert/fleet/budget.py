"""A fleet run's budgets: which cap is reached (pure, over the fold's `Spend`), the policy that makes a
worker wait or halt before its next model call, and the person's answer.

Caps (`[budgets]`, also `[budget]`; `hilbert run --budget CAP=VALUE`; 0: none) are per run
(`run_*`), per agent (`agent_*`), per task across all its attempts and reopenings (`task_*`), on
dollars, tokens (input + output; cache reads are counted apart and not capped), model calls and
wall seconds, and on the spend rate: dollars in any rolling hour, tokens in any rolling
`rate_window_s`. A cap is checked before each model call of a worker (`BudgetGuard`), so the call
that crosses it finishes: spend may pass a cap by one call.

- **Soft** (the default): the first worker to reach it records `budget_asked` (B1, ...); every worker
  the cap covers waits before its next model call — visibly: `hilbert status` says what waits for
  whom and how to answer. `hilbert approve B1 [--by N]` raises the cap by N (default: the cap's own
  setting again) and the waiting work goes on within a second; `hilbert reject B1` halts it, kept;
  `hilbert approve B1` after a reject raises it after all (the halted task: `hilbert retry` reopens it).
  A question asked holds its workers until answered, even once a rate's window moved on; the wait
  counts no wall time (`hilbert.fleet.spend`).
  Soft is the default because a cap's point is that the person decides: waiting loses nothing, and a
  worker that waits holds its conversation and workspace, so it goes on exactly where it was.
- **Hard** (`hard = ["run_usd", ...]`): the work halts at once with `budget_halted` (its workspace is
  archived, never deleted; the task waits for you and `hilbert retry` reopens it); for a run or rate
  cap no new task starts. For runs nobody watches. `hilbert approve B2 --by N` raises a hard cap too,
  for the retry.

The questions and answers are events, folded into `FleetState.spend` (`hilbert.fleet.spend`): a run
killed while a worker waits is still waiting once resumed; an answer given while it was down counts.
The run's own cost cap (`fleet.max_cost_usd`, `--max-cost`) stays a hard backstop beside these.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from hilbert.agent.policies import Action, Halt, LoopState, Policy
from hilbert.errors import UserError
from hilbert.fleet.events import (
    BudgetAsked,
    BudgetHalted,
    BudgetRaised,
    BudgetRefused,
    BudgetWaiting,
    FleetEvent,
)
from hilbert.fleet.inbox import EVERYONE, PERSON, STOPPED_BY_PERSON
from hilbert.fleet.spend import RUN, Question, Tally
from hilbert.fleet.state import FleetState
from hilbert.settings import BudgetSettings
from hilbert.store import EventStore

POLL_S = 0.5  # how often a waiting worker looks for the person's answer
CAPS: dict[str, tuple[str, str]] = {  # cap -> (whose spend, what is counted)
    f"{scope}_{measure}": (scope, measure.removesuffix("_s"))
    for scope in ("run", "agent", "task")
    for measure in ("usd", "tokens", "turns", "wall_s")
}
CAPS |= {"rate_usd_per_hour": ("rate", "usd"), "rate_tokens": ("rate", "tokens")}
DOLLARS = tuple(cap for cap, (_, measure) in CAPS.items() if measure == "usd")


@dataclass(frozen=True)
class Caps:
    """The caps as set (0: none), which are hard, and the token rate's window."""

    limits: Mapping[str, float]
    hard: frozenset[str] = frozenset()
    window_s: float = 60.0

    @classmethod
    def of(cls, budgets: BudgetSettings) -> Caps:
        values = {f.name: getattr(budgets, f.name) for f in fields(budgets)}
        return cls({c: float(values[c]) for c in CAPS}, frozenset(budgets.hard), budgets.rate_window_s)

    @classmethod
    def recorded(cls, settings: Mapping[str, Any]) -> Caps:
        """The caps as a run's log holds them (`FleetState.settings`, flat: `budgets.task_usd`)."""
        limits = {cap: float(settings.get(f"budgets.{cap}") or 0.0) for cap in CAPS}
        window = float(settings.get("budgets.rate_window_s") or 60.0)
        return cls(limits, frozenset(settings.get("budgets.hard") or ()), window)

    @property
    def set(self) -> list[str]:
        return [cap for cap, limit in self.limits.items() if limit > 0]

    @property
    def dollars(self) -> bool:
        """A dollar cap is set: the run needs every model's price."""
        return any(self.limits[cap] > 0 for cap in DOLLARS)


@dataclass(frozen=True)
class Reached:
    cap: str
    scope: str  # the task, the agent, or RUN
    limit: float
    spent: float
    hard: bool


def limit(state: FleetState, caps: Caps, cap: str, scope: str) -> float:
    """The cap on `scope` now: as set, plus what the person raised it by."""
    return caps.limits[cap] + state.spend.raised.get((cap, scope), 0.0)


def spent(state: FleetState, caps: Caps, cap: str, scope: str, now: float) -> float:
    """What `scope` has spent of what `cap` counts."""
    whose, measure = CAPS[cap]
    spend = state.spend
    if whose == "rate":
        usd, tokens = spend.in_window(now, 3600.0 if measure == "usd" else caps.window_s)
        return usd if measure == "usd" else float(tokens)
    if whose == "task" and measure == "wall":
        return sum(spend.agents.get(a.worker, Tally()).wall(now) for a in _attempts(state, scope))
    tally = spend.run if whose == "run" else (spend.agents if whose == "agent" else spend.tasks).get(scope)
    tally = tally or Tally()
    return tally.wall(now) if measure == "wall" else float(getattr(tally, measure))


def _attempts(state: FleetState, task: str) -> list[Any]:
    return [attempt for attempt in state.attempts.values() if attempt.task == task]


def reached(
    state: FleetState, caps: Caps, *, agent: str = "", task: str = "", now: float, run_only: bool = False
) -> list[Reached]:
    """The caps reached that cover `agent` working on `task` (with `run_only`, the run's and the
    rate's only), hard ones first."""
    found = []
    for cap in caps.set:
        whose = CAPS[cap][0]
        scope = {"agent": agent, "task": task}.get(whose, RUN)
        if (run_only and scope != RUN) or (whose in ("agent", "task") and not scope):
            continue
        cap_now, used = limit(state, caps, cap, scope), spent(state, caps, cap, scope, now)
        if used >= cap_now:
            found.append(Reached(cap, scope, cap_now, used, cap in caps.hard))
    return sorted(found, key=lambda r: not r.hard)


def run_stopped(state: FleetState, caps: Caps, now: float | None = None) -> bool:
    """A run-wide or rate cap is reached that is hard or that the person refused: nothing new starts."""
    now = time.time() if now is None else now
    return any(
        r.hard or (r.cap, r.scope) in state.spend.refused
        for r in reached(state, caps, now=now, run_only=True)
    )


class BudgetGuard(Policy):
    """Before each model call of `agent` (on `task`): wait while a soft cap covering it waits for the
    person (asking first if nobody has), halt on a hard or refused one. `waiting` names the question
    it waits on (liveness reads it: a worker waiting for the person is not hung); the log hears it once
    per wait (`budget_waiting`), so `status` says `paused` only once the worker spends nothing."""

    name = "budget"

    def __init__(
        self,
        state: Callable[[], FleetState],  # the run's fold, caught up
        record: Callable[[FleetEvent], object],
        caps: Caps,
        agent: str,
        task: str,
    ) -> None:
        self.state, self.record = state, record
        self.caps, self.agent, self.task = caps, agent, task
        self.waiting: str | None = None
        self.told: str | None = None  # the question this wait was logged as waiting on

    async def before_model_call(self, loop: LoopState) -> Sequence[Action]:
        try:
            while True:
                decided = self.look(self.state(), time.time())
                if decided is not None:
                    return decided
                await asyncio.sleep(POLL_S)
        finally:
            self.waiting = self.told = None

    def _waits(self, question: str) -> None:
        self.waiting = question
        if self.told != question:
            self.told = question
            self.record(BudgetWaiting(id=question, agent=self.agent))

    def look(self, state: FleetState, now: float) -> list[Action] | None:
        """What to do now: the actions (none: go on), or None: wait."""
        if not self.caps.set:
            return []
        if state.stops & {self.agent, EVERYONE}:  # the person's stop reaches a waiting worker too
            return [Halt(STOPPED_BY_PERSON, "person")] if self.waiting else []
        over = reached(state, self.caps, agent=self.agent, task=self.task, now=now)
        if not over:  # a question asked waits for its answer, even once a rate's window moved on
            covering = state.spend.covering(self.agent, self.task)
            if covering is None:
                self.waiting = None
                return []
            self._waits(covering.asked.id)
            return None
        first = over[0]
        key = (first.cap, first.scope)
        if first.hard or key in state.spend.refused:
            if first.hard and not _halted(state, first):
                self.record(BudgetHalted(**_question(state, first, self.agent, self.task)))
            return [Halt(_reason(first, refused=not first.hard), "budget")]
        question = state.spend.open_question(*key)
        if question is None:
            self.record(BudgetAsked(**_question(state, first, self.agent, self.task)))
            question = self.state().spend.open_question(*key)
        if question is None:  # not in the log yet (it cannot be: recorded above); wait and look again
            self.waiting = "?"
            return None
        self._waits(question.asked.id)
        return None


def _question(state: FleetState, r: Reached, agent: str, task: str) -> dict[str, Any]:
    number = len(state.spend.questions) + 1
    return {"id": f"B{number}", "cap": r.cap, "scope": r.scope, "limit": r.limit, "spent": r.spent,
            "agent": agent, "task": task}  # fmt: skip


def _halted(state: FleetState, r: Reached) -> bool:
    return any(
        q.hard and not q.answer and (q.asked.cap, q.asked.scope) == (r.cap, r.scope)
        for q in state.spend.questions.values()
    )


def _reason(r: Reached, *, refused: bool) -> str:
    how = "the person refused to raise" if refused else "it reached the hard cap"
    of = f" of {r.scope}" if r.scope else ""
    return f"{how} {r.cap}{of}: {amount(r.cap, r.spent)} of {amount(r.cap, r.limit)}"


def amount(cap: str, value: float) -> str:
    """`$0.0123`, `12,345 tokens`, `14 turns`, `3.5 min`, as the cap counts."""
    measure = CAPS[cap][1]
    if measure == "usd":
        return f"${value:.4f}" if value < 10 else f"${value:,.2f}"
    if measure == "wall":
        return f"{value / 60:.1f} min" if value >= 90 else f"{value:.0f} s"
    return f"{value:,.0f} {measure}"


def answer(
    store: EventStore, state: FleetState, question_id: str, *, approve: bool, by: float | None = None,
    why: str = "",
) -> tuple[Question, FleetEvent]:  # fmt: skip
    """Record the person's answer to budget question `question_id` (B1, any case) of the run `state`
    folds: a raise by `by` (default: the cap as set, else the limit it had), or a refusal. A refusal
    may be taken back later by a raise (the person changed their mind: the work it halted is kept, and
    `hilbert retry` reopens it); any other second answer is a `UserError`, as are an unknown question,
    a refused hard cap and a raise that is not one."""
    wanted, spend = question_id.strip().upper(), state.spend
    question = spend.questions.get(wanted)
    waiting = ", ".join(q.asked.id for q in spend.waiting())
    hint = f"waiting for you: {waiting}" if waiting else "none is waiting for you; see `hilbert status`"
    if question is None:
        raise UserError(f"no budget question {question_id!r} in run {state.run}", hint=hint)
    if question.answer and not (approve and question.answer == "refused"):
        raise UserError(f"{question.asked.id} was already {question.answer}", hint=hint)
    if not approve and question.hard:
        raise UserError(
            f"{question.asked.id} is a hard cap: its work halted already, nothing waits to be refused",
            hint=f"`hilbert approve {question.asked.id} --by N` raises it for a retry; or leave it",
        )
    record: FleetEvent = BudgetRefused(id=question.asked.id, why=why)
    if approve:
        default = Caps.recorded(state.settings).limits.get(question.asked.cap) or question.asked.limit
        by = default if by is None else by
        if by <= 0:
            raise UserError(
                f"--by {by:g} would not raise {question.asked.cap}", hint="give a positive amount"
            )
        record = BudgetRaised(id=question.asked.id, by=by)
    store.append(state.run, PERSON, record.kind, record.data())
    return question, record
