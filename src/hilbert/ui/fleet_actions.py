"""What the person does to a running fleet — send, stop, approve — each once, for every view: the
`hilbert send`/`stop`/`approve` commands and `hilbert top`'s keys call these same functions, so a key
records exactly the events its command records.

Each function appends the person's event to the run's log (`hilbert.fleet.inbox`,
`hilbert.fleet.proposals`) and returns the line that says what happens next; bad input is a
`UserError` — a stop or a message on a climb run too (its explorers have no inbox). What must not
live here: printing, and anything that reads a view's own copy of the run (each reads the run's
fold, `hilbert.fleet.state.Fold`).
"""

from __future__ import annotations

from hilbert.climb.state import is_climb
from hilbert.errors import UserError
from hilbert.fleet.budget_lines import answer_budget
from hilbert.fleet.inbox import EVERYONE, request_stop
from hilbert.fleet.inbox import send as deliver
from hilbert.fleet.proposals import decide, proposals
from hilbert.fleet.state import Fold
from hilbert.store import EventStore
from hilbert.ui.fleet_views import find_agent, run_ended, run_key, worker_states

BUDGET_QUESTION = "B"  # B1, B2, ...: a budget's question (`hilbert.fleet.budget`); proposals are P1, ...


def _not_a_climb(store: EventStore, run: str, what: str) -> None:
    """A climb's explorers have no inbox: a stop request or a message to one would never be read."""
    if is_climb(store, run):
        raise UserError(
            f"run {run} is a climb: its explorers read no {what}",
            hint=f"stop a climb with Ctrl-C where it runs (`hilbert climb --run {run} --resume` goes on);"
            " it also ends at its --tries, --max-time or --max-cost",
        )


def send_message(store: EventStore, run: str, name: str, text: str) -> str:
    """A message from the person to agent `name`, read at its next turn boundary."""
    _not_a_climb(store, run, "messages")
    state = Fold(store, run).catch_up()
    agent = find_agent(state, name)
    deliver(store, run, agent, text, key=run_key(state))
    label = worker_states(state).get(agent, state.agents[agent].status)
    if label in ("working", "thinking", "judged", "stuck", "paused"):
        return f"sent to {agent} (run {run}); it reads it before its next model call"
    # halted, done, dead, ...: nobody reads it now
    return (
        f"not read now: {agent} is {label} (run {run}); the message is kept in the log and "
        f"reaches {agent} only if it works again (a retried task, or `hilbert run --resume {run}`)"
    )


def stop_agents(store: EventStore, run: str, name: str | None) -> str:
    """Stop agent `name` (its work is kept), or with None every agent of the run."""
    _not_a_climb(store, run, "stop requests")
    agent = find_agent(Fold(store, run).catch_up(), name) if name else EVERYONE
    request_stop(store, run, agent)
    who = agent if name else "every agent, and no new task starts"
    return f"stop requested for {who} (run {run}); unfinished work is archived, never deleted"


def approve_proposal(store: EventStore, run: str, proposal: str, *, by: float | None = None) -> str:
    """The person's approval of `proposal` (P1, ...): a held scope change the running fleet applies, or
    a held candidate that goes to the merge queue (after the run ended: when it is resumed); or of a
    budget question (B1, ...): its cap raised `by` (default: as set), the work waiting on it goes on."""
    state = Fold(store, run).catch_up()
    wanted = proposal.strip().upper()
    if wanted.startswith(BUDGET_QUESTION):
        return answer_budget(store, state, wanted, approve=True, by=by, ended=run_ended(state))
    merge = any(p.merge for p in proposals(store, run) if p.id == wanted)
    if merge and (state.finished is not None or run_ended(state)):
        decided = decide(store, run, proposal, approve=True)
        return f"approved {decided.summary()} (run {run}); `hilbert run --resume {run}` merges it"
    if state.finished is not None or (run_ended(state) and not state.started):
        raise UserError(
            f"run {run} has ended: nothing would apply {proposal}",
            hint="put the change in the plan and run it again",
        )
    decided = decide(store, run, proposal, approve=True)
    return f"approved {decided.summary()} (run {run}); the running fleet applies it within seconds"


def reject_proposal(store: EventStore, run: str, proposal: str, why: str = "") -> str:
    """The person's rejection of `proposal`: never applied; the lead is told `why`. A budget question
    (B1, ...): its cap stays, and the work waiting on it halts, kept."""
    if proposal.strip().upper().startswith(BUDGET_QUESTION):
        return answer_budget(store, Fold(store, run).catch_up(), proposal, approve=False, why=why)
    decided = decide(store, run, proposal, approve=False, why=why)
    return f"rejected {decided.summary()} (run {run})"
