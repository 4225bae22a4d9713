"""Peer taint for workers (issue 14, item 5): a candidate of a worker that read a peer's message waits
for the lead, or without one the person.

A worker's message informs, asks or proposes; it must not steer another worker's own change past the
stop gate. So from the first `message_injected` that showed a worker another worker's `agent_message`,
its attempt is tainted (the fold: `AttemptView.tainted_at`, `peer_read`), and when its candidate passes
the gate the fold keeps it out of the merge queue (`FleetState.held`). `hold` records it as a `merge`
proposal (`proposal_held`, P1, P2, ... like the lead's, `hilbert.fleet.proposals`) naming the messages
read and the diff stat of the candidate since the first one: `PeerSnapshot`, the worker's inbox, commits
the work tree as it was before that message was delivered (`taint_snapshot`), and `hold` diffs the
candidate against it (against the attempt's base, the whole change, when there is none).

With a lead, the run consults it (`Lead.candidates`): its brief shows each held candidate with the
messages its worker read and the whole diff, and its `decide_candidate` tool approves or rejects it
(a decision by "lead", carried out at once). Without a lead, or before it decides, the person does, with
`hilbert approve P1` / `hilbert reject P1`. `settle` carries a decision out: approved,
`proposal_applied` (the fold moves the candidate to the queue, and the running driver submits it);
rejected, the attempt failed (`task_retried` or `task_escalated`, the reason as feedback) and a fresh
attempt, which read nothing, may try again. A run does not wait for the person: one that ends with a
candidate held says so, and `hilbert run --resume` settles decisions made since
(`hilbert.fleet.setup`). Everything here is derived from the log, so a resume holds what was not held
yet and settles each decision once.
"""

from __future__ import annotations

from collections.abc import Sequence

from hilbert.agent.policies import Action, Inject, LoopState, Policy
from hilbert.errors import RunError
from hilbert.fleet.context import RunContext
from hilbert.fleet.events import MERGE_HELD, ProposalApplied, ProposalHeld, TaintSnapshot
from hilbert.fleet.inbox import AGENT_MESSAGE, HARNESS, LEAD, Inbox
from hilbert.fleet.outcomes import failure
from hilbert.fleet.proposals import PROPOSAL_HELD, Proposal, proposals
from hilbert.fleet.state import FleetState
from hilbert.store import EventStore
from hilbert.store.event_store import Event
from hilbert.workspaces import Checkout

_DIFFSTAT_CHARS = 4000


class PeerSnapshot(Policy):
    """`inbox` (delegated to), which commits `checkout`'s work tree (`Workspaces.snapshot`) before it
    first delivers another worker's message to this attempt, and records `taint_snapshot`: what the
    worker did from then on is the diff of its candidate against that commit."""

    def __init__(self, ctx: RunContext, inbox: Inbox, task_id: str, worker: str, checkout: Checkout) -> None:
        self.ctx, self.inbox, self.name = ctx, inbox, inbox.name
        self.task_id, self.worker, self.checkout = task_id, worker, checkout
        attempt = ctx.state.attempts.get(worker)
        shown = attempt is not None and attempt.task == task_id and bool(attempt.tainted_at)
        self.taken = shown or bool(_snapshots(ctx, worker, task_id))  # one, even across a crash

    async def before_model_call(self, state: LoopState) -> Sequence[Action]:
        actions = self.inbox.before_model_call(state)
        if not self.taken and any(self._from_peer(action) for action in actions):
            self.taken = True  # once: a failure is recorded, and the diff falls back to the whole change
            ref, commit, why = f"refs/hilbert/taint/{self.task_id}", "", ""
            try:
                commit = await self.ctx.workspaces.snapshot(self.checkout, ref, "before a peer's message")
            except RunError as error:
                why = str(error)
            self.ctx.record(TaintSnapshot(task=self.task_id, worker=self.worker, commit=commit, why=why))
        return actions

    def _from_peer(self, action: Action) -> bool:
        if not isinstance(action, Inject) or not action.source:
            return False
        found = self.ctx.store.events(
            run=self.ctx.run, kinds=[AGENT_MESSAGE], after_id=action.source - 1, upto_id=action.source
        )
        return any(str(e.data.get("sender") or e.agent) != self.worker for e in found)


def since_first_message(ctx: RunContext, worker: str, task_id: str) -> str:
    """The commit of `worker`'s work tree before the first peer's message of its attempt at `task_id`
    reached it; "" when none was taken."""
    mine = _snapshots(ctx, worker, task_id)
    return str(mine[0].data.get("commit") or "") if mine else ""


def _snapshots(ctx: RunContext, worker: str, task_id: str) -> list[Event]:
    snapshots = ctx.store.events(run=ctx.run, agent=HARNESS, kinds=[TaintSnapshot.kind])
    return [e for e in snapshots if e.data.get("worker") == worker and e.data.get("task") == task_id]


async def hold(ctx: RunContext, task_id: str) -> str | None:
    """Record the `merge` proposal for `task_id`'s held candidate unless one names it already; its id."""
    state = ctx.state
    ref = state.held.get(task_id)
    if ref is None or any(
        p.action == MERGE_HELD and p.detail.get("ref") == ref for p in proposals(ctx.store, ctx.run)
    ):
        return None
    worker = state.current.get(task_id, "")
    attempt = state.attempts.get(worker)
    base = attempt.base if attempt is not None else ""
    since = since_first_message(ctx, worker, task_id)
    if since and attempt is not None:  # the snapshot is in the worker's repository: copy it in
        snapshot = f"refs/hilbert/taint/{task_id}/{attempt.worker_id}"
        git_dir = ctx.workspaces.existing(attempt.worker_id, base).git_dir
        try:
            await ctx.integration.receive(git_dir, f"refs/hilbert/taint/{task_id}", snapshot)
        except RunError:
            since = ""  # its workspace is gone: the whole change, against the base
    stat = await ctx.git.run(
        "-C", ctx.integration.path, "diff", "--stat", "--no-ext-diff", "--no-textconv", since or base, ref,
        check=False,
    )  # fmt: skip
    held = ctx.store.events(run=ctx.run, agent=HARNESS, kinds=[PROPOSAL_HELD])
    proposal = f"P{len(held) + 1}"
    read = attempt.peer_read if attempt is not None else []
    ctx.record(
        ProposalHeld(
            id=proposal,
            action=MERGE_HELD,
            detail={
                "task": task_id,
                "worker": worker,
                "ref": ref,
                "base": base,
                "since": since,  # the work tree before the first peer's message, when it was taken
                "diffstat": stat.stdout[-_DIFFSTAT_CHARS:] if stat.returncode == 0 else stat.stderr[:400],
            },
            worker_messages=[{"sender": sender, "id": message} for sender, message in read],
        )
    )
    return proposal


async def hold_all(ctx: RunContext) -> None:
    """At a resume: hold what a driver that died did not."""
    for task_id in list(ctx.state.held):
        await hold(ctx, task_id)


def settle(ctx: RunContext, proposal: Proposal) -> str | None:
    """Carry out the person's decision on a `merge` proposal, once: the task whose candidate now goes to
    the merge queue (approved), else None."""
    task_id = str(proposal.detail.get("task", ""))
    state = ctx.state
    if proposal.action != MERGE_HELD or state.held.get(task_id) != proposal.detail.get("ref"):
        return None  # settled already, or the task moved on
    if proposal.status == "approved":
        ctx.record(ProposalApplied(id=proposal.id, action=MERGE_HELD))
        return task_id
    if proposal.status == "rejected":
        who = "the lead" if proposal.decider == LEAD else "the person"
        why = f"{who} rejected its candidate ({proposal.id}, held: its worker had read a peer's message)"
        why += f": {proposal.why}" if proposal.why else ""
        task = state.task(task_id)
        for event in failure(task, state.states[task_id], why, max_attempts=ctx.settings.fleet.max_attempts):
            ctx.record(event)
    return None


def decided(store: EventStore, run: str, state: FleetState) -> list[Proposal]:
    """The person's decisions on held candidates that no run carried out yet: a finished run with any
    is resumed to carry them out (`hilbert run --resume RUN`)."""
    return [
        p
        for p in proposals(store, run)
        if p.action == MERGE_HELD
        and p.status in ("approved", "rejected")
        and state.held.get(str(p.detail.get("task", ""))) == p.detail.get("ref")
    ]


def settle_all(ctx: RunContext) -> list[str]:
    """At a resume: the decisions made while the run was down; the tasks released to the queue."""
    return [task for p in proposals(ctx.store, ctx.run) if (task := settle(ctx, p)) is not None]


__all__ = ["PeerSnapshot", "decided", "hold", "hold_all", "settle", "settle_all", "since_first_message"]
