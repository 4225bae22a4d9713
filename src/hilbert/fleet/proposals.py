"""Scope changes a worker asked for wait for the person (issue 5, layer 2: authority).

Only the person and the lead assign, cancel or widen work; a worker's message can inform, ask or
propose, and the lead reads it as data. So once a session of the lead has been shown a worker's
message (`ReadWorkerMessages` notes what the lead's inbox delivered), each *widening* action it takes
later in that session — add_task, split_task, a reassign with a note — is held instead of applied
(`hilbert.fleet.escalation`): a `proposal_held` event (P1, P2, ...) naming the worker messages read.
The person decides with `hilbert approve P1` / `hilbert reject P1` (`decide`: a `proposal_approved`
or `proposal_rejected` event by "person"); the running fleet notices (`hilbert.fleet.lead`'s
`Lead.watch_proposals`; a decision made while the run was down is applied when it resumes), runs the
lead's tool again as it would run now and records `proposal_applied`, or `proposal_stale`
with the reason when it no longer applies. `proposals` folds the log into each proposal's state, for
`hilbert status` and the run's summary. Narrowing and neutral actions (mark_impossible,
message_worker, a reassign without a note) apply at once. The setting `approve_worker_proposals =
false` applies widening actions at once too; the `lead_action` still names the messages read.

A proposal of action `merge` is a tainted worker's candidate held for the lead, or without one the
person (`hilbert.fleet.tainted`): listed apart, applied by moving it to the merge queue; the lead's
decision (its `decide_candidate` tool) is a `proposal_approved` / `proposal_rejected` event by "lead",
which counts only for such a proposal.

Event data: `proposal_held` {id, action, detail, arguments (the tool's, to run it again), added (new
tasks), notes, worker_messages [{sender, id}], session}; `proposal_approved` {id};
`proposal_rejected` {id, why}; `proposal_applied` {id, action}; `proposal_stale` {id, why}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from hilbert.agent.policies import Action, Inject, LoopState, Policy
from hilbert.errors import UserError
from hilbert.fleet.events import MERGE_HELD
from hilbert.fleet.inbox import AGENT_MESSAGE, HARNESS, LEAD, PERSON, Inbox
from hilbert.store import EventStore

PROPOSAL_HELD = "proposal_held"
PROPOSAL_APPROVED = "proposal_approved"
PROPOSAL_REJECTED = "proposal_rejected"
PROPOSAL_APPLIED = "proposal_applied"
PROPOSAL_STALE = "proposal_stale"
PROPOSAL_KINDS = (PROPOSAL_HELD, PROPOSAL_APPROVED, PROPOSAL_REJECTED, PROPOSAL_APPLIED, PROPOSAL_STALE)

Status = Literal["pending", "approved", "rejected", "applied", "stale"]


@dataclass(frozen=True)
class WorkerMessage:
    """A worker's message a session of the lead was shown: its sender and its event's id."""

    sender: str
    id: int

    def to_json(self) -> dict[str, Any]:
        return {"sender": self.sender, "id": self.id}


class ReadWorkerMessages(Policy):
    """The lead's `inbox` for one session, noting in `read` each worker's message it delivers."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox, self.name = inbox, inbox.name
        self.read: list[WorkerMessage] = []

    def before_model_call(self, state: LoopState) -> Sequence[Action]:
        actions = self.inbox.before_model_call(state)
        for action in actions:
            if not isinstance(action, Inject) or not action.source:
                continue
            for event in self.inbox.store.events(
                run=self.inbox.run, kinds=[AGENT_MESSAGE], after_id=action.source - 1, upto_id=action.source
            ):
                self.read.append(WorkerMessage(str(event.data.get("sender") or event.agent), event.id))
        return actions


@dataclass(frozen=True)
class Proposal:
    """A held action of the lead and where it stands; `decided_by` is the id of the person's first
    decision on it (later ones change nothing)."""

    id: str
    action: str
    detail: Mapping[str, Any]
    arguments: Mapping[str, Any]
    asked_by: tuple[WorkerMessage, ...]
    status: Status = "pending"
    why: str = ""
    decided_by: int | None = None
    decider: str = ""  # "person", or "lead" for a held candidate

    @property
    def senders(self) -> list[str]:
        return list(dict.fromkeys(message.sender for message in self.asked_by))

    @property
    def merge(self) -> bool:
        """A tainted worker's candidate (`hilbert.fleet.tainted`), not a scope change of the lead's."""
        return self.action == MERGE_HELD

    def what(self, width: int = 60) -> str:
        """`add_task T9 "Write nine.txt"`, cut to about `width` characters."""
        short = _short(self.action, self.detail, self.arguments)
        return f"{self.action} {short[: width - 1] + '…' if len(short) > width else short}"

    def summary(self) -> str:
        """`P1 add_task T9 "Write nine.txt" — asked by Poincaré`; `P2 merge candidate T3 of Noether
        (2 files changed, 5 insertions(+)) — it read messages from Poincaré`."""
        senders = ", ".join(self.senders) or "?"
        if self.merge:
            stat = str(self.detail.get("diffstat") or "").strip().splitlines()
            changed = f" ({stat[-1].strip()})" if stat else ""
            worker = self.detail.get("worker", "?")
            return f"{self.id} {self.what()} of {worker}{changed} — it read messages from {senders}"
        return f"{self.id} {self.what()} — asked by {senders}"


def proposals(store: EventStore, run: str) -> list[Proposal]:
    """Every proposal of `run`, in the order it was held, with its state from the log."""
    held: dict[str, Proposal] = {}
    events = store.events(run=run, kinds=PROPOSAL_KINDS)
    for event in events:
        data, pid = event.data, str(event.data.get("id", ""))
        if event.kind == PROPOSAL_HELD and event.agent == HARNESS:
            held[pid] = Proposal(
                pid,
                str(data.get("action", "")),
                dict(data.get("detail") or {}),
                dict(data.get("arguments") or {}),
                tuple(WorkerMessage(str(m["sender"]), int(m["id"])) for m in data.get("worker_messages", ())),
            )
            continue
        proposal = held.get(pid)
        if proposal is None:
            continue
        if event.kind in (PROPOSAL_APPROVED, PROPOSAL_REJECTED) and _may_decide(event.agent, proposal):
            if proposal.status == "pending":
                status: Status = "approved" if event.kind == PROPOSAL_APPROVED else "rejected"
                why = str(data.get("why") or "")
                by, who = event.id, event.agent
                held[pid] = replace(proposal, status=status, why=why, decided_by=by, decider=who)
        elif event.agent == HARNESS and proposal.status == "approved":
            status = "applied" if event.kind == PROPOSAL_APPLIED else "stale"
            held[pid] = replace(proposal, status=status, why=str(data.get("why") or ""))
    return list(held.values())


def _may_decide(agent: str, proposal: Proposal) -> bool:
    return agent == PERSON or (agent == LEAD and proposal.merge)


def pending(store: EventStore, run: str) -> list[Proposal]:
    """The proposals of `run` waiting for the person's decision."""
    return [proposal for proposal in proposals(store, run) if proposal.status == "pending"]


def decide(
    store: EventStore, run: str, proposal_id: str, *, approve: bool, why: str = "", by: str = PERSON
) -> Proposal:
    """Record the decision of the person (or `by` the lead, on a held candidate) on `proposal_id` (`P1`,
    any case); a `UserError` when `run` has no such proposal or it was decided already."""
    wanted = proposal_id.strip().upper()
    known = [p for p in proposals(store, run) if _may_decide(by, p)]
    proposal = next((p for p in known if p.id == wanted), None)
    waiting = ", ".join(p.id for p in known if p.status == "pending")
    if proposal is None:
        raise UserError(
            f"no proposal {proposal_id!r} in run {run}",
            hint=f"waiting for you: {waiting}"
            if waiting
            else "none is waiting for you; see `hilbert status`",
        )
    if proposal.status != "pending":
        said = f" ({proposal.why})" if proposal.why else ""
        raise UserError(
            f"{proposal.id} was already {proposal.status}{said}",
            hint=f"waiting for you: {waiting}" if waiting else "nothing else is waiting for you",
        )
    if approve:
        store.append(run, by, PROPOSAL_APPROVED, {"id": proposal.id})
    else:
        store.append(run, by, PROPOSAL_REJECTED, {"id": proposal.id, "why": why})
    return next(p for p in proposals(store, run) if p.id == proposal.id)


def pending_lines(store: EventStore, run: str, *, ended: bool = False) -> list[str]:
    """What `hilbert status` and a run's summary say about proposals still waiting for the person;
    once the run has `ended` nothing applies them any more."""
    waiting = [proposal for proposal in pending(store, run) if not proposal.merge]
    merges = [proposal for proposal in pending(store, run) if proposal.merge]
    lines = []
    if merges:
        lines.append(
            f"{len(merges)} candidate(s) of workers that read a peer's message wait for you "
            "(`hilbert approve ID` merges it"
            + (" once you run `hilbert run --resume`" if ended else "")
            + "; `hilbert reject ID [--why TEXT]` sends the task back):"
        )
        lines += [f"  {proposal.summary()}" for proposal in merges]
    if not waiting:
        return lines
    head = (
        f"{len(waiting)} scope change(s) a worker asked for were not applied: the run ended before "
        "you approved them (put them in the plan and run it again if you want them):"
        if ended
        else f"{len(waiting)} scope change(s) a worker asked for wait for you "
        "(`hilbert approve ID`, or `hilbert reject ID [--why TEXT]`):"
    )
    return [head, *(f"  {proposal.summary()}" for proposal in waiting), *lines]


def _short(action: str, detail: Mapping[str, Any], arguments: Mapping[str, Any]) -> str:
    task = arguments.get("task")
    if action == "add_task" and isinstance(task, Mapping):
        return f'{task.get("id", "?")} "{task.get("title", "")}"'
    if action == MERGE_HELD:
        return f"candidate {detail.get('task', '?')}"
    if action == "split_task":
        return f"{detail.get('task', '?')} into {', '.join(map(str, detail.get('into', ())))}"
    note = str(detail.get("note") or "").strip().splitlines()
    return f"{detail.get('task', '?')}" + (f": {note[0]}" if note else "")


__all__ = [
    "PROPOSAL_KINDS",
    "Proposal",
    "ReadWorkerMessages",
    "WorkerMessage",
    "decide",
    "pending",
    "pending_lines",
    "proposals",
]
