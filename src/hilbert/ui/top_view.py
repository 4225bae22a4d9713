"""What `hilbert top` shows, as plain data: pure functions from the run's fold (`FleetState`) and the
proposals' fold (`hilbert.fleet.proposals`) to rows and lines, with no terminal, no I/O and no clock
of their own (`now` is passed in), so the TUI, a web page or a report can show the same facts.

Each panel is a list of lines; an empty list means the log has nothing for that panel, and the TUI
says so under the panel's label — nothing here invents a number the log does not hold. The agents'
states come from `hilbert.ui.fleet_views.worker_states`, the same words `hilbert status` prints.
What must not live here: a fold of events of its own, widgets, and reading the log.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.fleet.budget import Caps
from hilbert.fleet.budget_lines import budget_lines as fleet_budgets
from hilbert.fleet.proposals import Proposal
from hilbert.fleet.state import AgentView, AttemptView, FleetState
from hilbert.ui.fleet_views import run_ended, run_label, worker_states
from hilbert.views.governor import BUCKET_NAMES, GovernorView

GATE_WORDS = {"done": "DONE", "not_done": "SENT BACK", "impossible": "IMPOSSIBLE"}
LANDED_WORDS = {
    "merged": "merged",
    "conflict": "conflicts with the branch",
    "rejected": "merge checks failed",
}


@dataclass(frozen=True)
class AgentRow:
    """One line of the agents table."""

    name: str
    task: str
    state: str
    turns: int
    tokens: int  # input + output (cache reads are part of the input)
    cost: str  # "$0.0123", or "$?" when a model call had no known price
    last_event: str  # its age: "12s ago"


def agent_rows(state: FleetState, now: float) -> list[AgentRow]:
    """Every worker (and the lead), in the order they first appeared in the log."""
    task_of = {attempt.worker: attempt.task for attempt in state.attempts.values()}
    rows = []
    for agent, label in worker_states(state, now).items():
        view = state.agents[agent]
        rows.append(
            AgentRow(
                agent,
                task_of.get(agent) or "-",
                label,
                view.turns,
                view.usage.input_tokens + view.usage.output_tokens,
                cost_text(view),
                f"{age(now - view.last_event_at)} ago",
            )
        )
    return rows


def cost_text(view: AgentView) -> str:
    """An agent's spend; `$?` for a model with no known price (a cost of 0 would be a guess)."""
    return "$?" if view.unpriced and not view.external else f"${view.cost_usd:.4f}"


def age(seconds: float) -> str:
    """12s, 4m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def run_line(state: FleetState) -> str:
    """The run's headline: its id and state, its tasks by state, what it spent."""
    counts: dict[str, int] = {}
    for task_state in state.states.values():
        counts[task_state.status] = counts.get(task_state.status, 0) + 1
    tasks = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items()))
    label = run_label(state) if state.started is not None else "no fleet"
    tasks = f"{len(state.states)} tasks ({tasks or 'none yet'})"
    return f"run {state.run} — {label} — {tasks} — {spent_text(state)}"


def spent_text(state: FleetState) -> str:
    """What the run spent; with a model of no known price, said to be more than the known part."""
    unpriced = any(view.unpriced and not view.external for view in state.agents.values())
    return f"${state.spent_usd:.4f} spent" + (" + $? (a model with no known price)" if unpriced else "")


def verdict_lines(state: FleetState) -> list[str]:
    """Each attempt the stop gate judged or the merge queue took, oldest first: its last verdict with
    the first reason, how often it was sent back, where its candidate landed; then why each task's last
    attempt did not land (the harness's words for a retry or an escalation)."""
    lines = []
    for attempt in state.attempts.values():
        head = f"{attempt.task} {attempt.worker}"
        if attempt.gate_open:
            lines.append(f"{head}: round {attempt.gate_open} being judged")
        if attempt.verdict is not None:
            lines.append(f"{head}: {_verdict(attempt)}")
        if attempt.landed:
            why = _first(attempt.landed_why)
            lines.append(
                f"{head}: {LANDED_WORDS.get(attempt.landed, attempt.landed)}" + (f" — {why}" if why else "")
            )
    lines += [
        f"{task}, why its last attempt did not land: {_first(why)}" for task, why in state.feedback.items()
    ]
    return lines


def _verdict(attempt: AttemptView) -> str:
    verdict = attempt.verdict
    assert verdict is not None
    word = GATE_WORDS.get(verdict.verdict, verdict.verdict)
    sent_back = attempt.rounds - (verdict.verdict != "not_done")
    before = (
        f" ({sent_back} send-back{'s' if sent_back != 1 else ''} before)"
        if sent_back and word != "SENT BACK"
        else ""
    )
    reason = f" — {_first(verdict.reasons[0])}" if verdict.reasons else ""
    return f"round {verdict.round}: {word}{before}{reason}"


def proposal_lines(proposals: Sequence[Proposal]) -> list[str]:
    """Proposals waiting for the person first (`approve` takes the first), then the decided ones."""
    waiting = [p for p in proposals if p.status == "pending"]
    decided = [p for p in proposals if p.status != "pending"]
    lines = [f"waiting: {p.summary()}" for p in waiting]
    return lines + [f"{p.status}: {p.summary()}" + (f" ({p.why})" if p.why else "") for p in decided]


def budget_lines(state: FleetState) -> list[str]:
    """The run's cost cap and what is spent of it, the default budget of one attempt, each task's
    own budget from the plan — as the run was started and resumed — then the fleet's budgets with what
    is left and their questions, as `hilbert status` says them (`hilbert.fleet.budget_lines`)."""
    settings = state.settings
    lines = []
    cap = settings.get("fleet.max_cost_usd")
    if cap:
        share = f" ({state.spent_usd / float(cap):.0%})" if float(cap) > 0 else ""
        lines.append(f"run: {spent_text(state)} of its ${float(cap):g} cap{share}")
    turns, usd = settings.get("budgets.max_turns"), settings.get("budgets.max_cost_usd")
    if turns and usd:
        lines.append(f"an attempt: up to {turns} model calls and ${float(usd):g}")
    for task in state.plan.tasks if state.plan is not None else ():
        if task.budget is not None:
            own = [f"{task.budget.turns} model calls"] if task.budget.turns else []
            own += [f"${task.budget.usd:g}"] if task.budget.usd else []
            lines.append(f"{task.id}: up to {' and '.join(own)} an attempt")
    if state.started is not None and (Caps.recorded(state.settings).set or state.spend.questions):
        lines += [line.strip() for line in fleet_budgets(state, ended=run_ended(state))[1:]]
    return lines


def governor_lines(view: GovernorView, now: float) -> list[str]:
    """What the machine's rate-limit governor does for the run's models (`hilbert.views.governor`), a
    line per provider key and model — calls at once, the limits it paces by, a pause, the breaker —
    then its newest notices; none when no call of the run's models went through it."""
    lines = []
    for bucket in view.buckets:
        parts = [f"{bucket.in_flight} of {bucket.window} calls at once"]
        if bucket.limits:
            parts.append(
                "limits "
                + ", ".join(
                    f"{limit.per_minute:,} {BUCKET_NAMES[limit.name]}/min"
                    f" ({'learned' if limit.learned else 'set'}, {limit.left:,} left)"
                    for limit in bucket.limits
                )
            )
        if bucket.paused_s:
            parts.append(f"every caller paused {bucket.paused_s:.0f} s more: {bucket.pause_why}")
        if bucket.breaker_s is not None:
            probe = f"a probe call in {bucket.breaker_s:.0f} s" if bucket.breaker_s else "a probe call goes"
            parts.append(f"circuit breaker open: {probe}")
        lines.append(f"{bucket.model} (key {bucket.key.partition('/')[0][:8]}): " + "; ".join(parts))
    for notice in view.notices:
        when = time.strftime("%H:%M:%S", time.localtime(notice.at))
        lines.append(f"{when} {notice.kind}: {notice.why}")
    return lines


def _first(text: str, width: int = 120) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    return first if len(first) <= width else first[: width - 1] + "…"
