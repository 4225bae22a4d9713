"""What `hilbert status`, `ask`, `send`, `stop` and `logs` show of a fleet run: read from the run's fold
(`hilbert.fleet.state.Fold`), never from a fold of their own. A view that refreshes (`status --watch`)
keeps its `Fold` and catches up with the events committed since its last look.
"""

from __future__ import annotations

import time
from pathlib import Path

from hilbert.errors import UserError
from hilbert.fleet.budget_lines import budget_lines, short_spend, waits
from hilbert.fleet.final_check import summary as final_summary
from hilbert.fleet.names import Name, lookup, to_id
from hilbert.fleet.person import fixed_meanwhile, fixed_tasks
from hilbert.fleet.person import summary as person_summary
from hilbert.fleet.state import HARNESS, PERSON, FleetState
from hilbert.security.envelope import MessageKey
from hilbert.store import EventStore
from hilbert.ui.log_view import format_event

STUCK_AFTER_S = 600.0  # the liveness setting's default: a view does not know the run's settings


def run_ended(state: FleetState) -> bool:
    """A fleet run has finished or its orchestrator is gone; a run without a fleet has no agent still
    running."""
    if state.started is not None:
        return state.finished is not None or state.process_alive() is False
    return all(view.status != "running" for agent, view in state.agents.items() if agent != PERSON)


def interrupted(state: FleetState) -> bool:
    """A fleet run whose orchestrator stopped (Ctrl-C) or died before it finished: it can be resumed."""
    return state.started is not None and state.finished is None and state.process_alive() is False


def run_label(state: FleetState) -> str:
    """live (its process runs), interrupted (resumable), finished, or unknown (another machine's)."""
    if state.finished is not None:
        return "finished"
    alive = state.process_alive()
    return "live" if alive else "interrupted" if alive is False else "unknown"


def runs_table(states: list[FleetState], started_at: dict[str, float], now: float | None = None) -> list[str]:
    """`hilbert runs`: one line per fleet run, oldest first — id, state, age, tasks done, the tasks
    that need you (not those the final check found fixed by another task's merge), what it spent,
    repository."""
    now = time.time() if now is None else now
    lines = [f"{'RUN':<30} {'STATE':<12} {'AGE':>6}  {'DONE':<7} {'NEEDS YOU':<10} {'SPENT':<10} REPOSITORY"]
    for state in states:
        assert state.started is not None
        done = sum(s.status == "done" for s in state.states.values())
        fixed = fixed_tasks(state)  # given up, yet the final check found them fixed: nothing to do
        yours = [t for t, s in state.states.items() if s.status == "needs_you" and t not in fixed]
        label = run_label(state) + (f" {state.pid}" if run_label(state) == "live" else "")
        lines.append(
            f"{state.run:<30} {label:<12} {_age(now - started_at.get(state.run, now)):>6}  "
            f"{f'{done}/{len(state.states)}':<7} {','.join(yours) or '-':<10} {short_spend(state):<10} "
            f"{state.started.repo}"
        )
    return lines


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def worker_states(
    state: FleetState, now: float | None = None, stuck_after_s: float = STUCK_AFTER_S
) -> dict[str, str]:
    """Each agent's state: `working`; `judged` (it called finish and the harness is checking); `stuck`
    (working, but no event for `stuck_after_s`; `thinking` instead while a model call is in flight: money
    is being spent); `paused` (its guard said it waits for the person's answer to a budget's question,
    `hilbert.fleet.budget`: a worker the question covers whose model call is still in flight spends,
    so it reads working or thinking until then — never paused, never idle, while money is spent); `dead`
    (its loop never stopped but the run's process is gone); `waiting` (its checked work waits in the merge
    queue); `done` (its work merged); `sent back` (its work did not land: a conflict or red checks); else
    how its loop ended (`halted`, ...). Each is about the agent's own attempt, whoever else worked on the
    same task."""
    now = time.time() if now is None else now
    gone = run_ended(state) if state.started is not None else False
    states = {}
    for agent, view in state.agents.items():
        if agent in (HARNESS, PERSON):
            continue
        attempt = state.attempts.get(agent)
        if view.status == "running":
            if gone:
                states[agent] = "dead"
            elif view.finishing:
                states[agent] = "judged"
            elif waits(state, agent):
                states[agent] = "paused"
            elif now - view.last_event_at > stuck_after_s:
                states[agent] = "thinking" if view.calling else "stuck"
            else:
                states[agent] = "working"
        elif attempt is not None and attempt.candidate:
            task = state.states.get(attempt.task)
            queued = (
                task is not None and task.status == "verifying" and state.current.get(attempt.task) == agent
            )
            landed = {"merged": "done", "conflict": "sent back", "rejected": "sent back"}
            states[agent] = landed.get(attempt.landed or "", "waiting" if queued else "sent back")
        else:
            states[agent] = view.status
    return states


def status_lines(state: FleetState, now: float | None = None) -> list[str]:
    """The run's line (tasks by state; interrupted and how to resume it; what changed at resumes; tasks
    escalated together with another; spend, budgets and their questions), then one line per agent:
    name, task, state, turns, tokens (cache reads apart), cost, age of its last event."""
    now = time.time() if now is None else now
    lines = []
    if state.started is not None:
        counts: dict[str, int] = {}
        for task_state in state.states.values():
            counts[task_state.status] = counts.get(task_state.status, 0) + 1
        tasks = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items()))
        lines.append(f"run {state.run}: {len(state.states)} tasks ({tasks})")
        if interrupted(state):
            lines.append(f"  interrupted: resume it with `hilbert run --resume {state.run}`")
        for number, resumed in enumerate(state.resumed, 1):
            changed = (
                "; ".join(f"{k} {a} -> {b}" for k, (a, b) in resumed.changed.items()) or "no setting changed"
            )
            lines.append(f"  resumed ({number}) by pid {resumed.pid}: {changed}")
        pending = [t for t, s in state.states.items() if s.status == "pending"]
        if pending:
            lines.append(f"  pending: {', '.join(pending)}")
        lines += _together(state)
        lines += person_summary(state)  # what needs the person, and how to reopen it
        lines += [f"  {line}" for line in fixed_meanwhile(state)]
        lines += budget_lines(state, now, ended=run_ended(state))  # spend, what is left, what waits
        lines += [
            f"  {line}" for line in final_summary(state.final_checks[-1] if state.final_checks else None)
        ]
    unsandboxed = state.started is not None and state.started.sandbox.startswith("UNSANDBOXED")
    task_of = {attempt.worker: attempt.task for attempt in state.attempts.values()}
    for agent, label in worker_states(state, now).items():
        view = state.agents[agent]
        usage = view.usage  # input includes cache reads: counted apart
        tokens = usage.input_tokens - usage.cache_read_tokens + usage.output_tokens
        cached = f" (+{usage.cache_read_tokens:,} cached)" if usage.cache_read_tokens else ""
        # a model with no known price (`hilbert run` says so as it starts): a cost of 0 would be a guess
        cost = f"{'$?':>9}" if view.unpriced and not view.external else f"${view.cost_usd:>8.4f}"
        lines.append(
            f"{agent:<14} {task_of.get(agent) or '-':<6} {label:<10} turns {view.turns:>3}  "
            f"tokens {tokens:>9,}{cached}  {cost}  last event {now - view.last_event_at:>5.0f}s ago"
            + ("  [UNSANDBOXED]" if unsandboxed else "")
        )
    return lines


def _together(state: FleetState) -> list[str]:
    """Escalated tasks whose candidate failed the merge checks only together with others (typed, in
    `merge_rejected`), each with where the other one stands."""
    lines = []
    for task, task_state in state.states.items():
        attempt = state.attempts.get(state.current.get(task, ""))
        if task_state.status == "escalated" and attempt is not None and attempt.landed_with:
            others = [
                f"{t} ({state.states[t].status if t in state.states else '?'})" for t in attempt.landed_with
            ]
            lines.append(f"  {task} escalated together with {', '.join(others)}")
    return lines


def run_key(state: FleetState) -> MessageKey | None:
    """The run's message-signing key (in its folder, beside its integration repository), if it has one."""
    if state.started is None or not state.started.integration:
        return None
    root = Path(state.started.integration).parent
    return MessageKey.for_run(root) if (root / "message.key").is_file() else None


def find_agent(state: FleetState, text: str) -> str:
    """The agent a person means by `text` ("poincare", "Poincaré", "erdos-2"), as logged."""
    agents = [a for a in state.agents if a not in (HARNESS, PERSON)]
    found = lookup(text, [Name(to_id(a), a) for a in agents])
    if found is None:
        raise UserError(
            f"no agent {text!r} in run {state.run}", hint=f"agents: {', '.join(agents) or 'none yet'}"
        )
    return found.display


def ask_facts(store: EventStore, state: FleetState, agent: str, *, recent: int = 8) -> str:
    """What the log says about `agent`, in plain words: its task, state, spend and latest steps."""
    view = state.agents[agent]
    attempt = state.attempts.get(agent)
    label = worker_states(state).get(agent, view.status)
    doing = "still working" if label in ("working", "judged", "stuck") else label
    lines = [
        f"{agent} is on task {attempt.task if attempt else '-'}, {doing}: {view.turns} model "
        f"calls, {view.tool_calls} tool calls ({view.tool_errors} failed), ${view.cost_usd:.4f}, last event "
        f"{time.time() - view.last_event_at:.0f}s ago."
    ]
    if view.claim:
        lines.append(f"Its claim: {view.claim}")
    if view.reason:
        lines.append(f"Why it stopped: {view.reason}")
    if attempt is not None and attempt.verdict is not None:
        last = attempt.verdict
        why = "; ".join(last.reasons) or "every check passed"
        lines.append(
            f"The stop gate's last verdict on its work (round {last.round}): {last.verdict} ({why})."
        )
    events = store.events(run=state.run, agent=agent)[-recent:]
    lines.append("Latest steps:")
    lines += [format_event(e, store).splitlines()[0] for e in events]
    return "\n".join(lines)
