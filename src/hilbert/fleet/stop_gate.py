"""The stop gate as the fleet's `on_stop` policy: a worker's word closes nothing.

Whenever a worker calls `finish` — or stops without it — `StopGate` commits its workspace on its
behalf and runs `hilbert.judge.gate.run_gate` from the task's base to that commit: the verify command
on a clean export (nothing uncommitted or git-ignored comes along), the integrity checks (with the
task's `allow_test_edits`), the held-out tests named by the task, and the judge model when the run has
one. Each step is a `gate_step` event as it finishes, the decision a `gate_verdict` event.

- done: the stop stands, and the `gate_verdict` event (the round's last word, written after the
  panel) names the commit the fleet takes as the task's candidate for the merge queue;
- not done: the worker is resumed with the reasons (and the failing output), up to `max_rounds`
  times; then the attempt is halted, for the scheduler to retry or the lead to decide;
- impossible (the judge model's word, or its veto after failed checks): halted with the cause
  `impossible`, which the fleet hands to the lead at once.
Every halt carries its cause as data (`hilbert.agent.policies.Cause`). The round's decision and what the
worker is told — the reasons, the failing output (never the held-out tests'), the command that puts
protected files back from copies in its workspace — are `hilbert.judge.rounds`', shared with
`hilbert hook stop`.

With a review panel (`Panel`: reviewers of distinct families and when to ask them), a change the gate
passed is reviewed before it becomes a candidate (`panel_reviewed` event, or `panel_skipped` when its
policy does not apply), before the round's verdict; agreed blocking findings send the worker back like
the gate's reasons, and count as a round.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hilbert.agent.policies import Action, CostPool, Halt, LoopState, Policy, Resume, Stop
from hilbert.commands import Runner
from hilbert.fleet.events import FleetEvent, GateRunning, GateStep, GateVerdict, PanelReviewed, PanelSkipped
from hilbert.fleet.originals import copy_in, original
from hilbert.fleet.plan import Task
from hilbert.judge.change import Allowances, change_between
from hilbert.judge.gate import GateResult, Step, decide, run_gate
from hilbert.judge.panel import PanelPolicy, PanelResult, Reviewer, review
from hilbert.judge.rounds import FEEDBACK as FEEDBACK  # re-exported: where the fleet's readers look
from hilbert.judge.rounds import IMPOSSIBLE as IMPOSSIBLE
from hilbert.judge.rounds import PANEL_FEEDBACK as PANEL_FEEDBACK
from hilbert.judge.rounds import Halted, Originals, SendBack, decide_round
from hilbert.models.types import Message, Model
from hilbert.workspaces import Checkout, Workspaces
from hilbert.workspaces.git import Git

Record = Callable[[FleetEvent], object]
OUTPUT_CHARS = 3000  # of a step's output in its `gate_step` event


@dataclass(frozen=True)
class Panel:
    """The review panel a run uses: its reviewers (distinct families) and when to ask them."""

    reviewers: tuple[Reviewer, ...]
    policy: PanelPolicy = field(default_factory=PanelPolicy)


class StopGate(Policy):
    name = "stop_gate"

    def __init__(
        self,
        task: Task,
        workspaces: Workspaces,
        checkout: Checkout,
        record: Record,
        *,
        git: Git,
        scratch: Path,
        runner: Runner,
        judge: Model | None = None,
        heldout: Path | None = None,
        panel: Panel | None = None,
        cost: CostPool | None = None,
        max_rounds: int = 3,
        gate_timeout_s: float = 3600.0,
        differential: bool = True,
        rounds: int = 0,
    ) -> None:
        self.task, self.workspaces, self.checkout, self.record = task, workspaces, checkout, record
        self.git, self.scratch, self.judge, self.heldout = git, scratch, judge, heldout
        self.max_rounds, self.panel = max_rounds, panel
        self.gate_timeout_s = gate_timeout_s  # the whole gate on one claim, once it has its command slot
        self.differential = differential
        self.cost = cost  # the run's pool: the judge's and the reviewers' spend counts toward its cap
        self.runner = runner  # the gate runs the worker's code (its tests): the workers' runner
        self.judging = False  # on_stop is running (liveness does not count this time as quiet)
        self.rounds = rounds  # rounds already judged (an attempt resumed after its orchestrator died)

    async def on_stop(self, state: LoopState, stop: Stop) -> Sequence[Action]:
        if stop.status not in ("finished", "no_finish"):
            return ()
        self.judging = True
        try:
            return await self.judge_stop(stop)
        finally:
            self.judging = False

    async def judge_stop(self, stop: Stop) -> Sequence[Action]:
        self.rounds += 1
        message = f"{self.task.id}: {stop.claim or 'stopped without finishing'}"
        commit = await self.workspaces.commit(self.checkout, message) or await self.workspaces.tip(
            self.checkout
        )
        result = await self.gate(commit, stop)
        self.spent(result.opinion.cost_usd if result.opinion else 0.0)
        reviewed = await self.review(commit) if result.verdict == "done" else None
        sent_back = reviewed is not None and reviewed.send_back
        verdict = "not_done" if sent_back else result.verdict
        self.record(  # the round's last word: a `done` verdict names the attempt's candidate
            GateVerdict(
                **self.where(commit),
                verdict=verdict,
                reasons=list(reviewed.reasons if reviewed and sent_back else result.reasons),
                checks_passed=all(step.passed for step in result.steps if step.name != "model"),
                claimed=stop.status == "finished",
                model=result.opinion.summary() if result.opinion else None,
                model_cost_usd=result.opinion.cost_usd if result.opinion else 0.0,
                panel=reviewed.summary() if reviewed and sent_back else None,
            )
        )
        decision = await decide_round(
            self.rounds,
            self.max_rounds,
            result,
            reviewed,
            commit=commit,
            verify=self.task.verify,
            originals=Originals(
                read=functools.partial(original, self.git, self.checkout.git_dir, self.checkout.base),
                copy=functools.partial(copy_in, self.checkout.work_tree),
            ),
        )
        if isinstance(decision, SendBack):
            return [Resume(Message("user", decision.text))]
        if isinstance(decision, Halted):
            return [Halt(decision.reason, decision.cause)]
        return ()

    async def gate(self, commit: str, stop: Stop) -> GateResult:
        scratch = self.scratch / f"{self.checkout.worker_id}-gate-{self.rounds}"
        # a dead orchestrator's gate may have left this round's scratch behind: it is ours, and transient
        await asyncio.to_thread(shutil.rmtree, scratch, ignore_errors=True)

        def recorded(step: Step) -> None:
            self.record(
                GateStep(
                    **self.where(commit),
                    step=step.name,
                    passed=step.passed,
                    summary=step.summary,
                    findings=list(step.findings),
                    output=step.output[-OUTPUT_CHARS:],
                )
            )

        def running(step: str, elapsed_s: float) -> None:  # a long verify shows it is still running
            self.record(GateRunning(**self.where(commit), step=step, elapsed_s=round(elapsed_s)))

        # the gate takes one command slot for all its runs, as a worker's command does (re-queueing behind
        # every worker for each of its steps held verdicts back), and its own limit starts once it has it
        left_out = await self.workspaces.nested_repositories(self.checkout)  # not in `commit`: named
        slots, runner = self.runner.slots, replace(self.runner, slots=None)
        try:
            async with slots or contextlib.nullcontext(), asyncio.timeout(self.gate_timeout_s):
                return await run_gate(
                    self.checkout.git_dir,
                    self.checkout.base,
                    commit,
                    verify=self.task.verify,
                    scratch=scratch,
                    git=self.git,
                    runner=runner,
                    heldout=self.heldout,
                    allow=Allowances(self.task.allow_test_edits),
                    judge=self.judge,
                    task=_task_text(self.task),
                    claim=f"{stop.claim}\n\n{stop.evidence}".strip(),
                    on_step=recorded,
                    on_wait=running,
                    left_out=left_out,
                    cache=self.scratch / "cache",  # runs at a base, shared by every attempt on it
                    differential=self.differential,
                )
        except TimeoutError:  # a step hung past the gate's own limit: not a verdict on the work
            step = Step("gate", False, f"the stop gate ran past timeouts.gate_s = {self.gate_timeout_s:g} s")
            recorded(step)
            return decide((step,), None)
        finally:  # in a thread (a big tree would stall the loop), and finished even if we are cancelled
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, scratch, ignore_errors=True))

    async def review(self, commit: str) -> PanelResult | None:
        """The panel's review of base → commit, when the run has a panel and its policy applies."""
        if self.panel is None:
            return None
        change = await change_between(self.checkout.git_dir, self.checkout.base, commit, self.git)
        if not self.panel.policy.applies(change):
            self.record(PanelSkipped(**self.where(commit), why="the change touches no path it reviews"))
            return None
        result = await review(_task_text(self.task), change, self.panel.reviewers)
        self.spent(result.cost_usd)
        self.record(PanelReviewed(**self.where(commit), summary=result.summary(), **result.to_json()))
        return result

    def spent(self, usd: float) -> None:
        if self.cost is not None:
            self.cost.spent_usd += usd

    def where(self, commit: str) -> dict[str, Any]:
        return {
            "task": self.task.id,
            "worker": self.checkout.worker_id,
            "commit": commit,
            "round": self.rounds,
        }


def _task_text(task: Task) -> str:
    lines = [f"{task.id}: {task.title}", task.description, f"Verify command: `{task.verify}`"]
    if task.allow_test_edits:
        lines.append(f"The task allows editing these tests: {', '.join(task.allow_test_edits)}")
    return "\n".join(line for line in lines if line)
