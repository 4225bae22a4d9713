"""What every view says about a fleet run's spend and budgets — `hilbert status`, `hilbert runs`, the
last lines of `hilbert run`, PR.md — read from the run's fold (`FleetState.spend`) and the caps its
log holds, never counted again; and the line `hilbert approve` / `reject` print for a budget question.
"""

from __future__ import annotations

import time

from hilbert.fleet.budget import CAPS, Caps, amount, answer, limit, spent
from hilbert.fleet.events import BudgetRaised
from hilbert.fleet.spend import RUN, Question
from hilbert.fleet.state import FleetState
from hilbert.store import EventStore


def spend_line(state: FleetState, now: float) -> str:
    """`$0.0123 · 12,345 tokens (+40,000 cache reads) · 14 model calls · 3.2 min`; `$?` for a cost
    that a model with no known price leaves unknown."""
    run = state.spend.run
    unpriced = any(view.unpriced and not view.external for view in state.agents.values())
    usd = (
        "$?" if unpriced and not run.usd else f"${run.usd:.4f}" + (" and more (unpriced)" if unpriced else "")
    )
    cached = f" (+{run.cache_read:,} cache reads)" if run.cache_read else ""
    wall = amount("run_wall_s", run.wall(now))
    return f"{usd} · {run.tokens:,} tokens{cached} · {run.turns} model calls · {wall}"


def short_spend(state: FleetState) -> str:
    """The run's dollars for a table: `$0.0123`, `$?` when a model had no known price."""
    if any(view.unpriced and not view.external for view in state.agents.values()):
        return "$?"
    return f"${state.spend.run.usd:.4f}"


def budget_lines(state: FleetState, now: float | None = None, *, ended: bool = False) -> list[str]:
    """The run's spend, each cap set with what is left, and the budgets' questions with how to answer
    them (`ended`: nothing runs now, so an answer counts when the run is resumed, and no wall time
    runs past the log's last event: a dead orchestrator's spans end there, as its resume ends them)."""
    now = time.time() if now is None else now
    if ended:
        now = min(now, state.spend.last_time)
    caps = Caps.recorded(state.settings)
    lines = [f"  spent: {spend_line(state, now)}"]
    left = []
    for cap in caps.set:
        for scope in _scopes(state, cap):
            cap_now, used = limit(state, caps, cap, scope), spent(state, caps, cap, scope, now)
            hard = " hard" if cap in caps.hard else ""
            rest, of = amount(cap, max(0.0, cap_now - used)), f" {scope}" if scope else ""
            left.append(f"{cap}{of} {amount(cap, used)} of {amount(cap, cap_now)}{hard}, {rest} left")
    if left:
        lines.append("  budgets: " + "; ".join(left))
    for question in state.spend.questions.values():
        lines += _question_lines(state, question, caps, ended=ended)
    return lines


def _scopes(state: FleetState, cap: str) -> list[str]:
    whose = CAPS[cap][0]
    if whose == "task":
        return list(state.states)
    if whose == "agent":
        return list(state.attempts)  # workers, by name
    return [RUN]


def _question_lines(state: FleetState, question: Question, caps: Caps, *, ended: bool) -> list[str]:
    asked, run = question.asked, state.run
    who = _who(asked.cap, asked.scope)
    reached = f"{asked.cap} ({amount(asked.cap, asked.spent)} of {amount(asked.cap, asked.limit)})"
    base = caps.limits.get(asked.cap) or asked.limit
    if question.waiting:
        then = " once you resume it (`hilbert run --resume " + run + "`)" if ended else " within a second"
        return [
            f"  waiting for you: {asked.id} — {who} reached its soft cap {reached}; its work waits. "
            f"`hilbert approve {asked.id} --run {run} [--by N]` raises it by N (default "
            f"{amount(asked.cap, base)}) and it goes on{then}; `hilbert reject {asked.id} --run {run}` "
            "halts it (work kept)"
        ]
    if question.hard and not question.answer:
        retry = f"`hilbert retry {run} {asked.task}`" if asked.task else f"`hilbert run --resume {run}`"
        return [
            f"  {asked.id} — {who} reached its hard cap {reached}: its work halted, kept. "
            f"`hilbert approve {asked.id} --run {run} --by N` raises it; then {retry} goes on"
        ]
    if question.answer == "refused":
        retry = _retry_line(run, asked.scope, asked.task)
        return [
            f"  {asked.id} — you refused to raise {asked.cap} of {who}: the work it held halted, kept. "
            f"`hilbert approve {asked.id} --run {run} [--by N]` raises it after all; then {retry} goes on"
        ]
    return []  # raised: the log keeps it (`hilbert log`)


def _retry_line(run: str, scope: str, task: str) -> str:
    """How the work a refused cap halted goes on once raised: a task's (or an agent's) by retrying its
    task; a run-wide or rate cap halted every worker it covered, each task by its retry."""
    if scope != RUN and task:
        return f"`hilbert retry {run} {task}`"
    return f"`hilbert retry {run} TASK` for each task it halted"


def question_refused(state: FleetState, question_id: str) -> bool:
    question = state.spend.questions.get(question_id.strip().upper())
    return question is not None and question.answer == "refused"


def _who(cap: str, scope: str) -> str:
    whose = CAPS[cap][0]
    return {"task": f"task {scope}", "agent": scope, "rate": "the run's spend rate"}.get(whose, "the run")


def waits(state: FleetState, agent: str) -> bool:
    """`agent`'s guard said it waits (`budget_waiting`) on a question still waiting for the person: it
    spends nothing until the answer. Once answered its wait is over, even before its next model call is
    logged: that call, in flight when a later question is asked, spends until its guard waits again."""
    view = state.agents.get(agent)
    question = state.spend.questions.get(view.waiting_on) if view is not None else None
    return question is not None and question.waiting


def answer_budget(
    store: EventStore, state: FleetState, question_id: str, *, approve: bool, by: float | None = None,
    why: str = "", ended: bool = False,
) -> str:  # fmt: skip
    """Record the person's answer (`hilbert.fleet.budget.answer`) and say what follows, in one line."""
    refused_before = question_refused(state, question_id)
    question, record = answer(store, state, question_id, approve=approve, by=by, why=why)
    asked, run = question.asked, state.run
    who = _who(asked.cap, asked.scope)
    if not approve:
        return (
            f"refused {asked.id}: {who} stays at its cap {asked.cap}; the work waiting on it halts, kept "
            f"(run {run}); `hilbert approve {asked.id} --run {run}` raises it later after all"
        )
    raise_by = record.by if isinstance(record, BudgetRaised) else 0.0
    now = amount(asked.cap, asked.limit + raise_by)
    if refused_before:
        then = f"{_retry_line(run, asked.scope, asked.task)} goes on"
    elif question.hard:
        then = (
            f"`hilbert retry {run} {asked.task}` goes on"
            if asked.task
            else f"`hilbert run --resume {run}` goes on"
        )
    elif ended:
        then = f"the work goes on when you resume it: `hilbert run --resume {run}`"
    else:
        then = "the waiting work goes on within a second"
    by_now = f"by {amount(asked.cap, raise_by)} to {now}"
    return f"raised {asked.cap} of {who} {by_now} ({asked.id}, run {run}); {then}"
