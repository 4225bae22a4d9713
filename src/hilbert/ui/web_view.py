"""What `hilbert web`'s page shows, as JSON-ready data: `page_data` is a pure function of one `RunLog`
(its `RunView` and the fold it keeps), the proposals waiting, and `now` — no I/O, no clock of its own.

The agents' rows and the budgets are `top_view`'s (the words `hilbert status` prints); the plan is laid out
here as a graph by dependency depth (a task's column is one more than its deepest dependency's), for
the page to draw. Strings are as logged: untrusted; the page shows them as text only.
What must not live here: a fold of its own, HTML, and reading the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from hilbert.climb.results import OTHER, STAGE_COLOURS, leaderboard, progress
from hilbert.climb.state import ClimbState
from hilbert.fleet.plan import Plan
from hilbert.fleet.proposals import Proposal
from hilbert.fleet.state import FleetState
from hilbert.models.types import Usage
from hilbert.ui.fleet_views import run_label
from hilbert.ui.top_view import agent_rows, budget_lines, proposal_lines
from hilbert.views import RunLog, SpendPoint

SPEND_POINTS = 400  # at most this many points of the spend line are sent: the page draws no more


def page_data(
    log: RunLog,
    proposals: Sequence[Proposal],
    now: float,
    governor: Sequence[str] = (),
    climb: ClimbState | None = None,
) -> dict[str, Any]:
    """Everything the page shows, for `json.dumps`; `governor` is what the machine's rate-limit governor
    does for the run's models, as `top_view.governor_lines` says it (read by the server: this is pure);
    `climb` the climb's fold when the run is a climb (its leaderboard and progress plot)."""
    view, state = log.view(), log.state
    summary = view.summary
    waiting = [q.asked.id for q in state.spend.waiting()] + [p.id for p in proposals if p.status == "pending"]
    return {
        "run": summary.run,
        "goal": summary.goal,
        "state": _label(log, climb),
        "summary": {
            "outcome": summary.outcome,
            "tasks": summary.tasks,
            "statuses": dict(summary.statuses),
            "merged": list(summary.merged),
            "needs_you": [list(pair) for pair in summary.needs_you],
            "cost_usd": summary.cost_usd,
            "unpriced": summary.unpriced,
            "tokens": _tokens(summary.tokens),
            "duration_s": summary.duration_s,
            "workers": summary.workers,
        },
        "agents": [asdict(row) for row in agent_rows(state, now)],
        "plan": plan_graph(state),
        "spend": [_point(point) for point in _thinned(view.spend)],
        "by_agent": [
            {"agent": a.agent, "cost_usd": a.cost_usd, "tokens": _tokens(a.tokens), "turns": a.turns}
            for a in view.agents
        ],
        "funnel": asdict(view.funnel),
        "reasons": [asdict(group) for group in view.reasons],
        "retries": [asdict(retry) for retry in view.retries],
        "queue": {
            "waiting": sorted(state.queue),
            "held": sorted(state.held),
            "batches": [
                {
                    "number": b.number,
                    "time": b.time,
                    "tasks": list(b.tasks),
                    "checks_passed": b.checks_passed,
                    "checks_failed": len(b.checks_failed),
                    "bisections": len(b.bisections),
                    "conflicts": [c.task for c in b.conflicts],
                    "rejected": [r.task for r in b.rejected],
                    "merged": list(b.merged),
                    "requeued": list(b.requeued),
                    "flaky": b.flaky,
                }
                for b in view.batches
            ],
        },
        "budgets": budget_lines(state),
        "governor": list(governor),
        "proposals": proposal_lines(proposals),
        "waiting": waiting,
        "climb": climb_data(climb) if climb is not None and climb.started is not None else None,
        "last_id": state.last_id,
    }


def _label(log: RunLog, climb: ClimbState | None) -> str:
    if climb is not None and climb.started is not None:
        return "climb finished" if climb.finished is not None else "climbing"
    return run_label(log.state) if log.state.started is not None else "no fleet yet"


def climb_data(state: ClimbState) -> dict[str, Any]:
    """A climb's leaderboard (the lines `hilbert climb --status` prints) and its progress plot's data
    (`climb.results.progress`, each point with its colour), for the page to draw."""
    shown = progress(state)
    plot = None
    if shown is not None:
        plot = {
            "base": shown.base,
            "band": shown.band,
            "last": shown.last,
            "unit": shown.unit,
            "low": shown.low,
            "high": shown.high,
            "best": [list(corner) for corner in shown.best],
            "points": [
                {"try": no, "median": median, "stage": stage, "colour": STAGE_COLOURS.get(stage, OTHER)}
                for no, median, stage in shown.points
            ],
        }
    return {"leaderboard": leaderboard(state), "progress": plot, "finished": state.finished is not None}


def plan_graph(state: FleetState) -> dict[str, Any]:
    """The plan's tasks as nodes (id, title, status, worker, column, row) and its dependencies as edges
    (from the dependency to the task that waits on it)."""
    plan: Plan | None = state.plan
    if plan is None:
        return {"nodes": [], "edges": []}
    ids = {task.id for task in plan.tasks}
    deps = {task.id: [d for d in task.depends_on if d in ids] for task in plan.tasks}
    depth: dict[str, int] = {}

    def column(task: str, seen: frozenset[str] = frozenset()) -> int:
        if task not in depth:
            depth[task] = 1 + max((column(d, seen | {task}) for d in deps[task] if d not in seen), default=-1)
        return depth[task]

    rows: dict[int, int] = {}
    nodes = []
    for task in plan.tasks:
        col = column(task.id)
        row = rows[col] = rows.get(col, -1) + 1
        status = state.states[task.id].status if task.id in state.states else "pending"
        worker = state.current.get(task.id, "")
        nodes.append(
            {"id": task.id, "title": task.title, "status": status, "worker": worker, "col": col, "row": row}
        )
    edges = [[d, task] for task, before in deps.items() for d in before]
    return {"nodes": nodes, "edges": edges}


def _thinned(points: Sequence[SpendPoint]) -> list[SpendPoint]:
    """At most `SPEND_POINTS` of them, evenly, the last always kept."""
    if len(points) <= SPEND_POINTS:
        return list(points)
    step = len(points) / SPEND_POINTS
    return [points[int(i * step)] for i in range(SPEND_POINTS - 1)] + [points[-1]]


def _point(point: SpendPoint) -> dict[str, Any]:
    return {
        "time": point.time,
        "agent": point.agent,
        "cost_usd": point.cost_usd,
        "tokens": _tokens(point.tokens),
    }


def _tokens(usage: Usage) -> dict[str, int]:
    return {
        "input": usage.input_tokens,
        "output": usage.output_tokens,
        "cache_read": usage.cache_read_tokens,
        "total": usage.input_tokens + usage.output_tokens,
    }
