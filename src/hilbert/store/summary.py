"""`agent_summary`: one agent's progress and spend, derived from its events (never kept elsewhere).

Status, the TUI, the web view and the report all show these numbers; they read them from here so
that every view agrees.
"""

from __future__ import annotations

from dataclasses import dataclass

from hilbert.errors import UserError
from hilbert.models.types import Usage
from hilbert.store.event_store import EventStore
from hilbert.store.kinds import (
    AGENT_STARTED,
    AGENT_STOPPED,
    CONTEXT_COMPACTED,
    MESSAGE_INJECTED,
    MODEL_CALL,
    MODEL_ERROR,
    TOOL_RESULT,
)

RUNNING = "running"


@dataclass(frozen=True)
class AgentSummary:
    """`status` is the last `agent_stopped`'s status, or "running" when the agent has not stopped
    since it last started (it may also be a process that died: the log cannot tell). `turns` counts
    committed model calls; `usage` and `cost_usd` add up theirs and those of the summarizing calls
    compaction made on the agent's behalf (in its `context_compacted` events)."""

    run: str
    agent: str
    status: str
    task: str | None
    model: str | None
    turns: int
    tool_calls: int
    tool_errors: int
    model_errors: int
    injected: int
    usage: Usage
    cost_usd: float
    started_at: float
    last_event_at: float
    claim: str | None = None
    reason: str | None = None


def agent_summary(store: EventStore, run: str, agent: str) -> AgentSummary:
    """Summarise `agent` in `run` from its events. Raises `UserError` for an unknown agent."""
    events = store.events(run=run, agent=agent)
    if not events:
        raise UserError(
            f"run {run!r} has no agent {agent!r}", hint=f"`hilbert log --run {run}` lists its agents"
        )
    status, task, model = RUNNING, None, None
    claim = reason = None
    turns = tool_calls = tool_errors = model_errors = injected = 0
    usage, cost = Usage(), 0.0
    for event in events:
        data = event.data
        if event.kind == AGENT_STARTED:
            status, task, model, claim, reason = RUNNING, data.get("task"), data.get("model"), None, None
        elif event.kind == MODEL_CALL:
            turns += 1
            usage += _usage(data.get("usage") or {})
            cost += float(data.get("cost_usd") or 0.0)
            model = model or data.get("model")  # agent_started names it as the person did
        elif event.kind == TOOL_RESULT:
            tool_calls += 1
            tool_errors += bool(data.get("is_error"))
        elif event.kind == MODEL_ERROR:
            model_errors += 1
        elif event.kind == MESSAGE_INJECTED:
            injected += 1
        elif event.kind == CONTEXT_COMPACTED:  # the summarizing calls compaction made for the agent
            for call in data.get("summary_calls") or ():
                usage += _usage(call.get("usage") or {})
                cost += float(call.get("cost_usd") or 0.0)
        elif event.kind == AGENT_STOPPED:
            status, claim, reason = str(data.get("status", "stopped")), data.get("claim"), data.get("reason")
    return AgentSummary(
        run=run,
        agent=agent,
        status=status,
        task=task,
        model=model,
        turns=turns,
        tool_calls=tool_calls,
        tool_errors=tool_errors,
        model_errors=model_errors,
        injected=injected,
        usage=usage,
        cost_usd=cost,
        started_at=events[0].time,
        last_event_at=events[-1].time,
        claim=claim,
        reason=reason,
    )


def _usage(data: dict[str, int]) -> Usage:
    return Usage(
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cache_read_tokens=int(data.get("cache_read_tokens", 0)),
        cache_write_tokens=int(data.get("cache_write_tokens", 0)),
    )
