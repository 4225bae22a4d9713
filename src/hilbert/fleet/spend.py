"""What a fleet run has spent, per run, per agent and per task, as part of its fold; and its budgets'
questions (`budget_asked`, `budget_halted`) with the person's answers.

`Spend` is a field of `hilbert.fleet.state.FleetState`, kept by `observe` (every event) and by the
budget events' handlers; nothing else counts spend, so a run killed and resumed reads the same.

- A `Tally` per scope: dollars, tokens (input + output; cache reads counted apart, since the usage's
  input includes them and they cost a tenth), model calls (turns), wall seconds. A worker's model
  calls count for itself, for its task (every attempt and reopening) and for the run; the stop
  gate's judge and the review panel count for the task and the run (only their dollars are logged).
- Wall time: an agent's from each `agent_started` to its `agent_stopped` (or its orchestrator's last
  event, when that died); a task's is the sum of its agents'; the run's the orchestrator's spans
  (started or resumed, to interrupted, finished, or the last event before a resume): a run that was
  down spends no wall time. Nor does work waiting for the person: while a question covering an agent
  waits, its wall time stops (and the run's, for a run or rate question), so a raise of a wall cap is
  not already spent on the wait when it comes.
- The rate: each model call's (time, dollars, tokens), a day's worth, for the rolling-window caps.
- Questions: each `budget_asked` / `budget_halted` (B1, B2, ...) and its answer; `raised` holds the
  person's raises per (cap, scope), `refused` the caps the person said no to.

Pure: reads events, does no I/O. The decisions (which cap is reached) are `hilbert.fleet.budget`'s.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hilbert.fleet import events as ev
from hilbert.store.event_store import Event

RATE_KEEP_S = 86400.0  # model calls older than this (before the newest) are not kept for the rate caps
RUN = ""  # the scope of a run-wide cap (and of a rate cap)


@dataclass
class Tally:
    usd: float = 0.0
    tokens: int = 0  # input + output, cache reads not counted
    cache_read: int = 0
    turns: int = 0
    seconds: float = 0.0  # wall time of spans that ended
    since: float | None = None  # the start of the span going on now

    def wall(self, now: float) -> float:
        return self.seconds + (max(0.0, now - self.since) if self.since is not None else 0.0)

    def add_call(self, usage: dict[str, int], usd: float) -> None:
        read = usage.get("cache_read_tokens", 0)
        self.usd += usd
        self.tokens += usage.get("input_tokens", 0) - read + usage.get("output_tokens", 0)
        self.cache_read += read
        self.turns += 1

    def open(self, at: float) -> None:
        if self.since is None:
            self.since = at

    def close(self, at: float) -> None:
        if self.since is not None:
            self.seconds += max(0.0, at - self.since)
            self.since = None


@dataclass
class Question:
    """A budget's question to the person (`hard`: it halted the work instead) and its answer."""

    asked: ev.BudgetAsked
    hard: bool
    answer: str = ""  # "" (waiting) | raised | refused
    by: float = 0.0
    why: str = ""

    @property
    def waiting(self) -> bool:
        return not self.answer and not self.hard


@dataclass
class Spend:
    run: Tally = field(default_factory=Tally)
    agents: dict[str, Tally] = field(default_factory=dict)
    tasks: dict[str, Tally] = field(default_factory=dict)
    calls: deque[tuple[float, float, int]] = field(default_factory=deque)  # (time, usd, tokens)
    questions: dict[str, Question] = field(default_factory=dict)  # B1 -> ...
    raised: dict[tuple[str, str], float] = field(default_factory=dict)  # (cap, scope) -> raised by
    refused: set[tuple[str, str]] = field(default_factory=set)
    last_time: float = 0.0
    task_of: dict[str, str | None] = field(default_factory=dict)  # agent -> the task it works on
    paused: set[str] = field(default_factory=set)  # agents whose wall time stopped for a question
    run_paused: bool = False  # the run's wall time stopped for a run or rate question

    def task(self, task: str) -> Tally:
        return self.tasks.setdefault(task, Tally())

    def agent(self, agent: str) -> Tally:
        return self.agents.setdefault(agent, Tally())

    def in_window(self, now: float, window_s: float) -> tuple[float, int]:
        """Dollars and tokens of the model calls in the `window_s` seconds before `now`."""
        usd, tokens = 0.0, 0
        for at, call_usd, call_tokens in reversed(self.calls):
            if at < now - window_s:
                break
            usd, tokens = usd + call_usd, tokens + call_tokens
        return usd, tokens

    def open_question(self, cap: str, scope: str) -> Question | None:
        """The question still waiting on (cap, scope), if any."""
        return next(
            (
                q
                for q in self.questions.values()
                if q.waiting and (q.asked.cap, q.asked.scope) == (cap, scope)
            ),
            None,
        )

    def waiting(self) -> list[Question]:
        return [q for q in self.questions.values() if q.waiting]

    def covering(self, agent: str, task: str | None) -> Question | None:
        """The first question waiting for the person that covers `agent` working on `task`: its own
        cap's, its task's, the run's or the rate's. Such a worker waits (`hilbert.fleet.budget`); an
        agent on no task (the lead) is never made to wait, so never covered."""
        if not task:
            return None
        return next((q for q in self.waiting() if q.asked.scope in (agent, task, RUN)), None)


KINDS = frozenset(
    {
        "model_call",
        "context_compacted",
        "agent_started",
        "agent_stopped",
        "gate_verdict",
        "panel_reviewed",
        "fleet_started",
        "fleet_resumed",
        "fleet_interrupted",
        "fleet_finished",
    }
)  # fmt: skip  (the kinds `observe` counts; the caller sets `last_time` for every event)


def observe(spend: Spend, event: Event, task: str | None) -> None:
    """Count `event`, one of `KINDS` (`task`: the task its agent works on, if any)."""
    kind, data = event.kind, event.data
    if kind == "model_call":
        _call(spend, event, task, data.get("usage") or {}, float(data.get("cost_usd") or 0.0))
    elif kind == "context_compacted":  # summaries made for the agent count as its calls
        for call in data.get("summary_calls") or ():
            _call(spend, event, task, call.get("usage") or {}, float(call.get("cost_usd") or 0.0))
    elif kind == "agent_started":
        spend.task_of[event.agent] = task
        spend.agent(event.agent).open(event.time)
        _pause(spend, event.time)
    elif kind == "agent_stopped":
        spend.agent(event.agent).close(event.time)
        spend.paused.discard(event.agent)
        if data.get("external"):  # not hilbert's loop: its spend is logged only here
            _call(spend, event, task, data.get("usage") or {}, float(data.get("cost_usd") or 0.0))
    elif kind == "gate_verdict":
        _judged(spend, str(data.get("task") or ""), float(data.get("model_cost_usd") or 0.0))
    elif kind == "panel_reviewed":
        _judged(spend, str(data.get("task") or ""), float(data.get("cost_usd") or 0.0))
    elif kind in ("fleet_started", "fleet_resumed"):
        for tally in (spend.run, *spend.agents.values()):  # a dead orchestrator's spans end at its last event
            tally.close(spend.last_time if kind == "fleet_resumed" else event.time)
        spend.run.open(event.time)
        spend.run_paused = False
        spend.paused.clear()  # their spans ended; a worker started again is paused again if it waits
        _pause(spend, event.time)
    elif kind in ("fleet_interrupted", "fleet_finished"):
        spend.run.close(event.time)
        spend.run_paused = False
    spend.last_time = event.time


def _call(spend: Spend, event: Event, task: str | None, usage: dict[str, Any], usd: float) -> None:
    spend.run.add_call(usage, usd)
    spend.agent(event.agent).add_call(usage, usd)
    if task:
        spend.task(task).add_call(usage, usd)
    tokens = usage.get("input_tokens", 0) - usage.get("cache_read_tokens", 0) + usage.get("output_tokens", 0)
    calls = spend.calls
    calls.append((event.time, usd, tokens))
    if calls[0][0] < event.time - RATE_KEEP_S:
        while calls and calls[0][0] < event.time - RATE_KEEP_S:
            calls.popleft()


def _judged(spend: Spend, task: str, usd: float) -> None:
    spend.run.usd += usd
    if task:
        spend.task(task).usd += usd


def _pause(spend: Spend, at: float) -> None:
    """Stop the wall time of the agents (and the run) a waiting question covers; go on with those no
    question covers any more. `at`: the time of the event that changed it."""
    for agent, task in spend.task_of.items():
        tally = spend.agent(agent)
        if spend.covering(agent, task) is not None and tally.since is not None:
            tally.close(at)
            spend.paused.add(agent)
        elif spend.covering(agent, task) is None and agent in spend.paused:
            tally.open(at)
            spend.paused.discard(agent)
    run_waits = any(q.asked.scope == RUN for q in spend.waiting())
    if run_waits and spend.run.since is not None:
        spend.run.close(at)
        spend.run_paused = True
    elif not run_waits and spend.run_paused:
        spend.run.open(at)
        spend.run_paused = False


def asked(spend: Spend, e: ev.BudgetAsked) -> None:
    spend.questions[e.id] = Question(e, hard=isinstance(e, ev.BudgetHalted))
    _pause(spend, spend.last_time)


def raised(spend: Spend, e: ev.BudgetRaised) -> None:
    question = spend.questions.get(e.id)
    if question is None or question.answer == "raised":
        return  # an unknown question, or raised already: the first raise counts
    question.answer, question.by = "raised", e.by  # a refusal may be taken back by a raise
    key = (question.asked.cap, question.asked.scope)
    spend.raised[key] = spend.raised.get(key, 0.0) + e.by
    spend.refused.discard(key)
    _pause(spend, spend.last_time)


def refused(spend: Spend, e: ev.BudgetRefused) -> None:
    question = spend.questions.get(e.id)
    if question is None or question.answer:
        return
    question.answer, question.why = "refused", e.why
    spend.refused.add((question.asked.cap, question.asked.scope))
    _pause(spend, spend.last_time)
