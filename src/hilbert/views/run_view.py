"""`RunLog`: the fold of one run's log (`hilbert.fleet.state.apply`) plus what the fold does not keep —
when each attempt and lead session started and ended, the run's spend after each event that spent, the
stop gate's rounds, the send-backs, the merge queue's batches — and `view()`, a pure function of both to
a `RunView` (`hilbert.views.types`).

A live view keeps one `RunLog` and calls `catch_up(store)` again: it applies only the events committed
since. A `RunLog` belongs to one reader, as a `FleetState` does.

What must not live here: a second fold of the same facts (cost, tokens, task states and how attempts
ended come from the fold), rendering, and I/O but reading the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hilbert.fleet import events as ev
from hilbert.fleet.budget_lines import budget_lines
from hilbert.fleet.state import HARNESS, PERSON, FleetState, apply
from hilbert.models.types import Usage
from hilbert.store.event_store import Event, EventStore
from hilbert.store.folding import catch_up
from hilbert.views.types import (
    AgentSpend,
    Bar,
    Batch,
    Funnel,
    Outcome,
    ReasonGroup,
    Retry,
    RunOutcome,
    RunView,
    SpendPoint,
    Summary,
)

_EXAMPLE = 300  # characters of a reason shown as its group's example
_MODEL_STEP = "model"  # the judge model's gate step: it fails whenever a check failed, so it is a reason
# of its own only when it alone said no


@dataclass
class _Batch:
    number: int
    started: ev.MergeBatchStarted
    time: float
    passed: int = 0
    failed: list[ev.MergeChecksFailed] = field(default_factory=list)
    bisections: list[ev.MergeBisect] = field(default_factory=list)
    conflicts: list[ev.MergeConflict] = field(default_factory=list)
    rejected: list[ev.MergeRejected] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    flaky: int = 0

    def frozen(self) -> Batch:
        return Batch(
            self.number,
            self.time,
            tuple(self.started.tasks),
            self.started.base,
            self.passed,
            tuple(self.failed),
            tuple(self.bisections),
            tuple(self.conflicts),
            tuple(self.rejected),
            tuple(self.merged),
            tuple(self.requeued),
            self.flaky,
        )


class RunLog:
    """One run's fold and its history, fed one committed event at a time."""

    def __init__(self, run: str) -> None:
        self.state = FleetState(run)
        self.first_time = 0.0
        self.last_time = 0.0
        self.started_time = 0.0  # the run's `fleet_started`
        self.finished_time = 0.0  # its last `fleet_finished`
        self._attempt_start: dict[str, float] = {}  # worker display name -> its `task_started`
        self._attempt_end: dict[str, float] = {}  # ... -> its `task_attempted`
        self._sessions: dict[str, list[list[float]]] = {}  # agent -> [start, end (0: open)] per loop
        self._rounds: dict[tuple[str, str], list[tuple[float, str]]] = {}  # (task, worker id) -> verdicts
        self._failed_steps: dict[tuple[str, str, str, int], list[str]] = {}
        self._verdicts: list[tuple[ev.GateVerdict, list[str]]] = []
        self._ended: list[ev.TaskAttempted] = []
        self._retries: list[Retry] = []
        self._batches: list[_Batch] = []
        self._spend: list[SpendPoint] = []
        self._agent_cost: dict[str, float] = {}
        self._tokens = Usage()

    @classmethod
    def read(cls, store: EventStore, run: str) -> RunLog:
        return cls(run).catch_up(store)

    def catch_up(self, store: EventStore) -> RunLog:
        """Apply the run's events committed since the last call (by any process)."""
        catch_up(store, self.state, lambda state, event: self.apply(event))
        return self

    def apply(self, event: Event) -> None:
        state = self.state
        cost = state.spent_usd
        agent = state.agents.get(event.agent)
        tokens = list(agent.tokens) if agent is not None else [0, 0, 0, 0]
        apply(state, event)  # the one fold; what follows only notes when
        self.first_time = self.first_time or event.time
        self.last_time = max(self.last_time, event.time)
        after = state.agents.get(event.agent)
        grown = [b - a for a, b in zip(tokens, after.tokens, strict=True)] if after is not None else [0] * 4
        if state.spent_usd != cost or any(grown):
            self._tokens = self._tokens + Usage(*grown)
            self._agent_cost[event.agent] = self._agent_cost.get(event.agent, 0.0) + state.spent_usd - cost
            self._spend.append(SpendPoint(event.time, event.agent, state.spent_usd, self._tokens))
        if event.kind == "agent_started":
            self._sessions.setdefault(event.agent, []).append([event.time, 0.0])
        elif event.kind == "agent_stopped" and self._sessions.get(event.agent):
            self._sessions[event.agent][-1][1] = event.time
        record = ev.decode(event)
        if record is not None:
            self._note(record, event.time)

    def _note(self, e: ev.FleetEvent, time: float) -> None:
        if isinstance(e, ev.FleetStarted):
            self.started_time = self.started_time or time
        elif isinstance(e, ev.FleetFinished):
            self.finished_time = time
        elif isinstance(e, ev.TaskStarted):
            self._attempt_start[e.worker] = time
        elif isinstance(e, ev.TaskAttempted):
            self._attempt_end[e.worker] = time
            self._ended.append(e)
        elif isinstance(e, ev.GateStep) and not e.passed:
            self._failed_steps.setdefault((e.task, e.worker, e.commit, e.round), []).append(e.step)
        elif isinstance(e, ev.GateVerdict):
            self._rounds.setdefault((e.task, e.worker), []).append((time, e.verdict))
            failed = self._failed_steps.pop((e.task, e.worker, e.commit, e.round), [])
            self._verdicts.append((e, failed))
        elif isinstance(e, ev.TaskRetried):
            self._retries.append(Retry(time, e.task, "retried", e.decision, e.why))
        elif isinstance(e, ev.TaskEscalated):
            self._retries.append(Retry(time, e.task, "escalated", e.decision, e.why))
        elif isinstance(e, ev.TaskNeedsYou):
            self._retries.append(Retry(time, e.task, "needs you", e.why, e.evidence))
        elif isinstance(e, ev.MergeBatchStarted):
            self._batches.append(_Batch(len(self._batches) + 1, e, time))
        elif self._batches:
            self._note_merge(self._batches[-1], e)

    @staticmethod
    def _note_merge(batch: _Batch, e: ev.FleetEvent) -> None:
        if isinstance(e, ev.MergeChecksPassed):
            batch.passed += 1
        elif isinstance(e, ev.MergeChecksFailed):
            batch.failed.append(e)
        elif isinstance(e, ev.MergeBisect):
            batch.bisections.append(e)
        elif isinstance(e, ev.MergeConflict):
            batch.conflicts.append(e)
        elif isinstance(e, ev.MergeRejected):
            batch.rejected.append(e)
        elif isinstance(e, ev.Merged):
            batch.merged.append(e.task)
        elif isinstance(e, ev.MergeRequeued):
            batch.requeued.extend(e.tasks)
        elif isinstance(e, ev.FlakyTest):
            batch.flaky += 1

    # -- the view ------------------------------------------------------------------------------------

    def view(self) -> RunView:
        summary = self._summary()
        return RunView(
            summary=summary,
            bars=self._bars(summary.ended_at),
            spend=tuple(self._spend),
            agents=self._agents(),
            funnel=self._funnel(),
            reasons=self._reasons(),
            retries=tuple(self._retries),
            batches=tuple(b.frozen() for b in self._batches),
        )

    def _summary(self) -> Summary:
        state = self.state
        order = [t.id for t in state.plan.tasks] if state.plan is not None else list(state.states)
        counts: dict[str, int] = {}
        for task_state in state.states.values():
            counts[task_state.status] = counts.get(task_state.status, 0) + 1
        outcome: RunOutcome = (
            "finished" if state.finished else "interrupted" if state.interrupted else "not finished"
        )
        tokens = Usage()
        for agent in state.agents.values():
            tokens = tokens + agent.usage
        ended = state.finished is not None or state.process_alive() is False  # an answer waits for a resume
        return Summary(
            run=state.run,
            goal=state.plan.goal if state.plan is not None else "",
            outcome=outcome,
            tasks=len(state.states),
            statuses=tuple(sorted(counts.items())),
            merged=tuple(t for t in order if t in state.merged),
            needs_you=tuple((task, e.why) for task, e in state.needs_you.items()),
            cost_usd=state.spent_usd,
            unpriced=any(a.unpriced and not a.external for a in state.agents.values()),
            tokens=tokens,
            started_at=self.started_time or self.first_time,
            ended_at=self.finished_time if state.finished else self.last_time,
            workers=len(state.attempts),
            budgets=tuple(line.strip() for line in budget_lines(state, self.last_time, ended=ended)[1:]),
        )

    def _bars(self, now: float) -> tuple[Bar, ...]:
        state, bars = self.state, []
        for attempt in state.attempts.values():
            start = self._attempt_start.get(attempt.worker, self.first_time)
            end = self._attempt_end.get(attempt.worker)
            outcome, detail = _outcome(state, attempt.worker)
            rounds = tuple(self._rounds.get((attempt.task, attempt.worker_id), ()))
            bars.append(
                Bar(attempt.worker, attempt.task, start, end or now, outcome, end is None, rounds, detail)
            )
        for agent, sessions in self._sessions.items():
            if agent in state.attempts or agent in (HARNESS, PERSON):
                continue
            view = state.agents.get(agent)
            for start, end in sessions:
                why = view.status if view is not None and end else "running"
                bars.append(Bar(agent, "", start, end or now, "lead", not end, (), why))
        return tuple(sorted(bars, key=lambda bar: (bar.start, bar.agent)))

    def _agents(self) -> tuple[AgentSpend, ...]:
        state, rows = self.state, []
        for agent in sorted({*state.agents, *self._agent_cost}):
            view = state.agents.get(agent)
            if agent == PERSON or (view is None and not self._agent_cost.get(agent)):
                continue
            rows.append(
                AgentSpend(
                    agent,
                    self._agent_cost.get(agent, 0.0),
                    view.usage if view is not None else Usage(),
                    view.turns if view is not None else 0,
                    bool(view and view.unpriced and not view.external),
                )
            )
        return tuple(sorted(rows, key=lambda row: (-row.cost_usd, row.agent)))

    def _funnel(self) -> Funnel:
        verdicts = [v for v, _ in self._verdicts]
        back = [v for v in verdicts if v.verdict != "done"]
        return Funnel(
            claimed=len(verdicts),
            without_claim=sum(not v.claimed for v in verdicts),
            sent_back=len(back),
            by_panel=sum(v.panel is not None for v in back),
            impossible=sum(v.verdict == "impossible" for v in back),
            done=len(verdicts) - len(back),
            merged=len(self.state.merged),
            conflicts=sum(len(b.conflicts) for b in self._batches),
            rejected=sum(len(b.rejected) for b in self._batches),
        )

    def _reasons(self) -> tuple[ReasonGroup, ...]:
        groups: dict[tuple[str, str], tuple[int, list[str], str]] = {}

        def add(source: str, reason: str, task: str, example: str) -> None:
            count, tasks, first = groups.get((source, reason), (0, [], example))
            groups[(source, reason)] = (count + 1, tasks if task in tasks else [*tasks, task], first)

        for verdict, failed in self._verdicts:
            if verdict.verdict == "done":
                continue
            example = verdict.panel or "; ".join(verdict.reasons)
            if verdict.verdict == "impossible":
                keys = ["impossible (the judge)"]
            elif verdict.panel is not None:
                keys = ["review panel"]
            else:
                steps = [step for step in dict.fromkeys(failed) if step != _MODEL_STEP]
                keys = steps or [
                    "judge model" if _MODEL_STEP in failed or verdict.checks_passed else "checks"
                ]
            for key in keys:
                add("stop gate", key, verdict.task, example)
        for ended in self._ended:
            if ended.candidate is None:
                how = ended.status + (f" ({ended.cause})" if ended.cause else "")
                add("attempt", how, ended.task, ended.reason)
        for batch in self._batches:
            for conflict in batch.conflicts:
                add("merge queue", "conflict", conflict.task, ", ".join(conflict.files))
            for rejected in batch.rejected:
                how = (
                    "red only together with " + ", ".join(rejected.with_tasks) if rejected.with_tasks else ""
                )
                add(
                    "merge queue",
                    how or "red checks",
                    rejected.task,
                    f"{rejected.command}: {rejected.output}",
                )
        return tuple(
            ReasonGroup(source, reason, count, tuple(tasks), example[:_EXAMPLE])  # type: ignore[arg-type]
            for (source, reason), (count, tasks, example) in sorted(
                groups.items(), key=lambda item: (-item[1][0], item[0])
            )
        )


def _outcome(state: FleetState, worker: str) -> tuple[Outcome, str]:
    """How the fold says `worker`'s attempt ended, and the detail a person reads first."""
    attempt = state.attempts[worker]
    ended = attempt.ended
    if attempt.landed == "merged":
        return (
            "merged",
            f"merged as {state.merged[attempt.task].commit[:12]}" if attempt.task in state.merged else "",
        )
    if attempt.landed in ("conflict", "rejected"):
        return "sent back", f"{attempt.landed}: {attempt.landed_why}"[:_EXAMPLE]
    if attempt.candidate:
        return ("held" if attempt.task in state.held else "waiting"), attempt.candidate
    if ended is None:
        return "running", ""
    how = (
        f"{ended.status}"
        + (f" ({ended.cause})" if ended.cause else "")
        + (f": {ended.reason}" if ended.reason else "")
    )
    return ("stopped" if ended.cause in ("person", "cost_cap", "budget") else "not done"), how[:_EXAMPLE]
