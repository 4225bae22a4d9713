"""The lead's side of a running fleet: when it may act, its sessions on escalated tasks, the `Steering`
seam its tools act through (`hilbert.fleet.steering`), and the proposals a session held for the
person, applied once the person approves them (`hilbert.fleet.proposals`).

`Lead` reads the run's state from the fold (`ctx.state`) and changes it only by recording events
(`lead_action`, `plan_changed`, `task_state`, ...): a session whose process died leaves its
escalations to a new session of the resumed run, and its held proposals stay in the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from hilbert.agent.loop import run_agent
from hilbert.agent.policies import AgentResult, SharedCostLimit, TurnLimit
from hilbert.errors import UserError
from hilbert.fleet.context import RunContext
from hilbert.fleet.escalation import DIFF_CHARS, EscalationToolBox, candidate_section, escalation_brief
from hilbert.fleet.events import (
    MERGE_HELD,
    LeadAction,
    LeadAnswered,
    LeadConsulted,
    PlanChanged,
    ProposalApplied,
    ProposalHeld,
    ProposalStale,
    TaskRetryAsked,
    decode,
)
from hilbert.fleet.inbox import AGENT_MESSAGE, EVERYONE, HARNESS, LEAD, PERSON, Inbox, send
from hilbert.fleet.messages import next_hop
from hilbert.fleet.names import Name, lookup
from hilbert.fleet.plan import Plan, write_plan
from hilbert.fleet.proposals import (
    PROPOSAL_APPROVED,
    PROPOSAL_HELD,
    PROPOSAL_REJECTED,
    Proposal,
    ReadWorkerMessages,
    WorkerMessage,
    decide,
    proposals,
)
from hilbert.fleet.scheduler import TaskState
from hilbert.fleet.state import SHOWN_HELD
from hilbert.fleet.steering import SteeringTools
from hilbert.fleet.tainted import settle

DECISIONS_POLL_S = 1.0  # how often the run looks for the person's decisions on held proposals


class Lead:
    """The lead of one run (`Steering` for its tools). `roster()` names the workers running now;
    `woken` is set whenever the lead changed the plan or a state, for the driver to look again."""

    def __init__(
        self,
        ctx: RunContext,
        roster: Callable[[], Sequence[Name]],
        release: Callable[[str], None] = lambda task: None,
    ) -> None:
        self.ctx, self.roster, self.release = ctx, roster, release
        # one for all sessions: none is lost (what a session that died had read goes to the next one)
        self.inbox = Inbox(ctx.store, ctx.run, LEAD, key=ctx.key, after=ctx.state.lead_read, joined=0)
        self.woken = asyncio.Event()
        self.unseen: set[str] = set()  # held candidates whose diff a session was shown cut

    # -- Steering ---------------------------------------------------------------------------------

    @property
    def plan(self) -> Plan:
        assert self.ctx.state.plan is not None
        return self.ctx.state.plan

    @property
    def states(self) -> Mapping[str, TaskState]:
        return self.ctx.state.states

    @property
    def stopped(self) -> AbstractSet[str]:
        return self.ctx.state.stopped

    def steer(
        self,
        action: str,
        detail: dict[str, Any],
        *,
        plan: Plan | None = None,
        states: Mapping[str, TaskState] = {},
        notes: Mapping[str, str] = {},
    ) -> None:
        """Apply what the lead decided (already validated by its tools) and record it."""
        ctx = self.ctx
        path = ctx.root / "PLAN.md"
        if plan is not None:  # first what can fail, so that a failure changes nothing
            partial = ctx.root / ".PLAN.md.partial"
            partial.write_text(write_plan(plan))
            partial.replace(path)
        ctx.record(LeadAction(action=action, notes=dict(notes), **detail))
        if plan is not None:
            known = {t.id for t in self.plan.tasks}
            added = [t.model_dump(mode="json") for t in plan.tasks if t.id not in known]
            ctx.record(
                PlanChanged(
                    tasks=[t.id for t in plan.tasks],
                    added=added,
                    plan=plan.model_dump(mode="json"),
                    path=str(path),
                )
            )
        for state in states.values():
            ctx.set_state(state)
        self.woken.set()

    def message_worker(self, worker: str, text: str) -> str:
        name = lookup(worker, self.roster())
        if name is None:
            running = ", ".join(n.display for n in self.roster()) or "none"
            raise UserError(f"no running worker is called {worker!r}", hint=f"running now: {running}")
        store, run = self.ctx.store, self.ctx.run
        # never refused, but as deep as what this session was shown of workers' messages
        session = store.events(run=run, agent=HARNESS, kinds=[LeadConsulted.kind])
        hop = next_hop(store, run, LEAD, since=session[-1].id if session else 0)
        send(store, run, name.display, text, sender=LEAD, key=self.ctx.key, hop=hop)
        return name.display

    def propose(
        self,
        action: str,
        detail: dict[str, Any],
        arguments: Mapping[str, Any],
        *,
        read: Sequence[WorkerMessage],
        plan: Plan | None = None,
        notes: Mapping[str, str] = {},
    ) -> str:
        """Hold what the lead decided for the person's approval; the proposal's id (P1, P2, ...)."""
        held = self.ctx.store.events(run=self.ctx.run, agent=HARNESS, kinds=[PROPOSAL_HELD])
        proposal = f"P{len(held) + 1}"
        known = {t.id for t in self.plan.tasks}
        added = [t.model_dump(mode="json") for t in plan.tasks if t.id not in known] if plan else []
        self.ctx.record(
            ProposalHeld(
                id=proposal,
                action=action,
                detail=detail,
                arguments=dict(arguments),
                added=added,
                notes=dict(notes),
                worker_messages=[message.to_json() for message in read],
                session=self.ctx.state.lead_sessions,
            )
        )
        return proposal

    # -- sessions ---------------------------------------------------------------------------------

    def may_act(self, stopping: bool) -> bool:
        """A lead is configured, the run is not stopping, nobody stopped the lead, sessions are left."""
        state = self.ctx.state
        return (
            self.ctx.models.lead is not None
            and not stopping
            and not ({LEAD, EVERYONE} & state.stops)
            and state.lead_sessions < self.ctx.settings.fleet.lead_sessions
        )

    async def consult(self, escalated: list[str]) -> AgentResult:
        """One session of the lead on `escalated`, with read tools over a checkout of the integration tip."""
        ctx = self.ctx
        assert ctx.models.lead is not None
        session = ctx.state.lead_sessions + 1
        candidates = self.candidates()
        ctx.record(LeadConsulted(tasks=escalated, session=session, held=[p.id for p in candidates]))
        tip = await ctx.integration.tip()
        checkout = await ctx.workspaces.provision(f"lead-{session}-{ctx.state.last_id}", tip)
        state = ctx.state
        shown = {p.id for p in candidates}
        pending = [p for p in proposals(ctx.store, ctx.run) if p.status == "pending" and p.id not in shown]
        held = [p.summary() for p in pending]
        # what a session that died with its process did already (every lead_action since the last
        # session that answered): the new one is shown the same messages, and must not do it twice
        done = [
            _summary(action)
            for e in ctx.store.events(run=ctx.run, kinds=["lead_action"], after_id=state.lead_answered_at)
            if isinstance(action := decode(e), LeadAction)
        ]
        brief = escalation_brief(
            self.plan, state.states, escalated, state.feedback,
            running=state.running_workers(), held=held, done=done,
            candidates=[await self._candidate(p) for p in candidates],
        )  # fmt: skip
        inbox = ReadWorkerMessages(self.inbox)  # what this session was shown of workers' messages
        tools = EscalationToolBox(
            checkout.work_tree,
            self,
            runner=ctx.runner,
            max_reopens=ctx.settings.fleet.max_reopens,
            read=lambda: inbox.read,
            hold_widening=ctx.settings.fleet.approve_worker_proposals,
        )
        spend = SharedCostLimit(ctx.cost)
        try:
            result = await run_agent(
                run=ctx.run,
                agent=LEAD,
                task=brief,
                model=ctx.models.lead,
                toolbox=tools,
                store=ctx.store,
                policies=[TurnLimit(ctx.settings.fleet.lead_turns), spend, inbox],
            )
            spend.settle(result.cost_usd)
        finally:
            closing = ctx.closing(checkout.worker_id)
            await asyncio.shield(ctx.workspaces.archive_or_remove(checkout, ctx.integration, closing=closing))
        return result

    def candidates(self) -> list[Proposal]:
        """Held candidates (`hilbert.fleet.tainted`) waiting for a decision that no lead session was
        shown yet: with a lead, they are its to decide (the person may decide first)."""
        state = self.ctx.state
        return [
            p
            for p in proposals(self.ctx.store, self.ctx.run)
            if p.merge
            and p.status == "pending"
            and SHOWN_HELD + p.id not in state.shown
            and state.held.get(str(p.detail.get("task", ""))) == p.detail.get("ref")  # not moved on
        ]

    async def _candidate(self, proposal: Proposal) -> str:
        """`proposal`'s section of the brief: the messages its worker read and its change."""
        ctx, detail = self.ctx, proposal.detail
        since, ref = str(detail.get("since") or detail.get("base", "")), str(detail.get("ref", ""))
        git = ("-C", ctx.integration.path, "diff", "--no-ext-diff", "--no-textconv")
        diff = await ctx.git.run(*git, since, ref, check=False)
        files = await ctx.git.run(*git, "--name-status", since, ref, check=False)
        read = []
        for message in proposal.asked_by:
            last = message.id
            found = ctx.store.events(run=ctx.run, kinds=[AGENT_MESSAGE], after_id=last - 1, upto_id=last)
            read.append((message.sender, str(found[0].data.get("text", "")) if found else "(not in the log)"))
        task = ctx.state.task(str(detail.get("task", "")))
        change = diff.stdout if diff.returncode == 0 else f"(git diff failed: {diff.stderr[:300]})"
        if diff.returncode != 0 or len(change) > DIFF_CHARS:
            self.unseen.add(proposal.id)  # the lead will not see the whole change
        return candidate_section(
            proposal.id, task, str(detail.get("worker", "?")), read, files.stdout, change
        )

    def decide_candidate(
        self, proposal: str, *, approve: bool, why: str, read: Sequence[WorkerMessage] = ()
    ) -> str:
        """The lead's decision on a held candidate, carried out at once (see `decided`). An approval
        stays with the person when the lead did not see the whole change, or when its session read a
        message from a sender whose message the candidate's worker read (that peer lobbying the lead)."""
        wanted = proposal.strip().upper()
        held = next((p for p in proposals(self.ctx.store, self.ctx.run) if p.id == wanted and p.merge), None)
        lobbied = sorted({m.sender for m in read} & set(held.senders)) if held else []
        if approve and held is not None and (held.id in self.unseen or lobbied):
            why_not = (
                f"this session read messages from {', '.join(lobbied)}, whose message its worker read"
                if lobbied
                else "you did not see its whole change"
            )
            return (
                f"{held.id} is not approved: {why_not}, so it waits for the person (`hilbert approve "
                f"{held.id}`). Nothing more is needed from you for it; reject it if you saw enough to."
            )
        decided = decide(self.ctx.store, self.ctx.run, proposal, approve=approve, why=why, by=LEAD)
        self.decided(decided)
        task = decided.detail.get("task", "?")
        if approve:
            return f"{decided.id} is approved: the candidate of {task} goes to the merge queue."
        return f"{decided.id} is rejected: {task} is sent back, with your reason for its next worker."

    def consulted(self, finished: asyncio.Task[AgentResult]) -> None:
        error = finished.exception()
        state = self.ctx.state
        unanswered = [
            t
            for t, s in state.states.items()
            if s.status == "escalated" and t in state.shown and t not in state.stopped
        ]
        self.ctx.record(
            LeadAnswered(
                status="error" if error else finished.result().status,
                error=f"{type(error).__name__}: {error}" if error else None,
                still_escalated=unanswered,
            )
        )

    # -- the person's decisions on held proposals -------------------------------------------------

    async def watch_proposals(self, every_s: float = DECISIONS_POLL_S) -> None:
        """Every `every_s`, carry out the person's new decisions on held proposals. Runs until cancelled.
        Decisions made while the run was not running are carried out when it resumes."""
        store, run = self.ctx.store, self.ctx.run
        applied = {
            e.data.get("id")
            for e in store.events(run=run, agent=HARNESS, kinds=["proposal_applied", "proposal_stale"])
        }
        seen, retries = 0, self.ctx.state.last_id
        while True:
            for retry in store.events(run=run, agent=PERSON, kinds=[TaskRetryAsked.kind], after_id=retries):
                retries = retry.id  # the person's `hilbert retry`: the driver looks at the states again
                self.woken.set()
            for event in store.events(
                run=run, agent=PERSON, kinds=[PROPOSAL_APPROVED, PROPOSAL_REJECTED], after_id=seen
            ):
                seen = event.id
                proposal = next((p for p in proposals(store, run) if p.decided_by == event.id), None)
                if proposal is None or proposal.id in applied:  # not the first decision, or done already
                    continue
                try:
                    self.decided(proposal)
                except Exception as error:  # a harness step failed (the disk): say so, keep watching
                    why = f"the harness failed to apply it: {type(error).__name__}: {error}"
                    self.ctx.record(ProposalStale(id=proposal.id, why=why))
            await asyncio.sleep(every_s)

    def decided(self, proposal: Proposal) -> None:
        """Apply a proposal the person approved, as the lead's tool would now (or record why it no
        longer applies); tell the lead either way."""
        if proposal.action == MERGE_HELD:  # a tainted worker's candidate (`hilbert.fleet.tainted`)
            released = settle(self.ctx, proposal)
            if released is not None:
                self.release(released)
            self.woken.set()
            return
        what = f"{proposal.id} ({proposal.what()})"
        if proposal.status == "rejected":
            why = f": {proposal.why}" if proposal.why else ""
            self.tell_lead(f"The person rejected {what}{why}. It is not applied.")
            return
        if proposal.status != "approved":
            return
        tools = SteeringTools(self, max_reopens=self.ctx.settings.fleet.max_reopens, approved=proposal.id)
        try:
            tools.call(proposal.action, dict(proposal.arguments))
        except UserError as refused:
            why = str(refused)  # with its hint
            self.ctx.record(ProposalStale(id=proposal.id, why=why))
            self.tell_lead(f"The person approved {what}, but it no longer applies: {why}.")
            return
        self.ctx.record(ProposalApplied(id=proposal.id, action=proposal.action))
        self.tell_lead(f"The person approved {what}; it is applied. Nothing more is needed from you for it.")

    def tell_lead(self, text: str) -> None:
        """A note from the harness the lead reads in its current or next session."""
        send(self.ctx.store, self.ctx.run, LEAD, text, sender=HARNESS, key=self.ctx.key)


def _summary(action: LeadAction) -> str:
    """`reassign T5 (start from the new tip…)`: one action of the lead, for a later session's brief."""
    said = action.note or action.reason or ", ".join(action.into or ())
    said = said.strip().splitlines()[0][:80] if said.strip() else ""
    return f"{action.action} {action.task}" + (f" ({said})" if said else "")
