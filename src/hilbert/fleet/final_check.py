"""The run's last look: the whole suite on a clean checkout of the integration tip, against the base.

The merge queue checks each batch in its merge tree; before a run hands its branch over, the project's
test command (`commands.test`) runs once more where nothing a merge check left can help it: a tree
rebuilt from the tip's commit (`FinalCheck`, a `MergeTree` of its own), and at the run's base in the
same way. The base's result is kept in the log (`final_base`), so a later round or a resumed run does
not run it again. What the comparison (`compare`, pure) makes of the two:

- *new*: tests that fail at the tip, did not fail at base, and fail again when the tip's suite runs a
  second time — they become a repair task (`repair_task`) for at most `fleet.final_repair_rounds`
  rounds; after the last round they are listed in the run's summary and its PR description;
- *flaky*: failed at the tip, passed on the second run — listed, not a task;
- *pre-existing*: failed at base too — listed, not a task (the run did not cause them).

It also runs the check of each task given up (`GIVEN_UP`: it needs the person, or the lead marked it
impossible, or it still waits on such a task when the run ends) on the tip's tree and, for those that
pass there, at the base: one that passes at the tip and fails at base is recorded (`passing`): another
task's merge fixed what it was about, and the run's last lines say so instead of asking the person to
retry it. The checks run one after another, each within `timeouts.merge_s`.

A command that starts no pytest is compared by its exit status alone (one "test", `EXIT`): red at the
tip and green at base is new; red at both is pre-existing. The driver (`hilbert.fleet.run`) asks
`due` when nothing runs and nothing can start, and records what `check` returns; a run that merged
nothing, or that is stopping, is not checked (it claims nothing).
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from hilbert.fleet import events as ev
from hilbert.fleet.context import RunContext
from hilbert.fleet.merge_checks import CommandRun, Scratch
from hilbert.fleet.plan import Plan, Task

EXIT = "(exit status)"  # the one "test" of a command whose outcomes no pytest reported
# tasks whose check the final check runs too: given up, or still pending when the run ends (nothing
# runs and nothing can start: it waits on one given up, as a split task waits on its parts)
GIVEN_UP = frozenset({"needs_you", "impossible", "pending"})
OUTPUT_CHARS = 3000  # of the failing run's output, kept in the log and given to the repair task
REPAIR = "repair"  # a repair task's id is REPAIR-<round>


@dataclass(frozen=True)
class Suite:
    """One run of the test command: green or not, and the tests that failed (`gathered`: named by the
    judge's reporter; else the exit status is all there is)."""

    ok: bool
    failing: tuple[str, ...]
    gathered: bool
    output: str = ""

    @classmethod
    def of(cls, run: CommandRun) -> Suite:
        gathered = run.ran_to_the_end
        failing = tuple(sorted(run.failures)) if gathered else ()
        if not run.ok and not failing:  # red, but no test named: a collection error, a timeout, no pytest
            failing = (EXIT,)
        return cls(run.ok, failing, gathered, run.output[-OUTPUT_CHARS:])


@dataclass(frozen=True)
class Findings:
    new: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()
    preexisting: tuple[str, ...] = ()


def compare(base: Suite, tip: Suite, again: Suite | None) -> Findings:
    """What failed at the tip, sorted into new, flaky (`again`: the tip's second run, None if it was
    not run: then nothing is flaky) and pre-existing (failing at base too)."""
    at_base = set(base.failing)
    if (
        EXIT in at_base
    ):  # base red with no test to blame (no pytest, a collection error): nothing is known new
        return Findings(preexisting=tip.failing)
    preexisting = tuple(t for t in tip.failing if t in at_base)
    suspects = [t for t in tip.failing if t not in at_base]
    ended_early = again is None or not (again.ok or again.gathered)  # not run again, or it did not finish
    failing_again = set(suspects) if ended_early or again is None else set(again.failing)
    new = tuple(t for t in suspects if t in failing_again)
    flaky = tuple(t for t in suspects if t not in failing_again)
    return Findings(new, flaky, preexisting)


def repair_task(plan: Plan, round_: int, new: Sequence[str], command: str, output: str) -> Task | None:
    """The task that makes the new failures pass again, or None when no verify could show it: its verify
    runs those tests by node id (`python -m pytest -q ID...`, from the tree's root, whatever the test
    command is); without ids (a command without pytest, which passed at base) the whole command."""
    ids = [t for t in new if t != EXIT]
    if ids:
        verify = "python -m pytest -q " + " ".join(shlex.quote(t) for t in ids[:50])
    elif EXIT in new:
        verify = command
    else:
        return None
    taken = {t.id for t in plan.tasks}
    task_id = f"{REPAIR}-{round_}"
    while task_id in taken:
        task_id += "x"
    fenced = output.replace("```", "'''")
    listed = "\n".join(f"- `{t}`" for t in new[:50]) + (
        f"\n- … {len(new) - 50} more" if len(new) > 50 else ""
    )
    return Task(
        id=task_id,
        title="Make the whole suite pass on the integration branch again",
        verify=verify,
        description=(
            "The run's final check ran the project's whole test suite on a clean checkout of the "
            f"integration branch (`{command}`). These tests fail there, passed at the run's base, and "
            "failed again when run a second time, so a merged change broke them:\n"
            f"{listed}\n\nFix the code so they pass; do not change what the tests expect.\n\n"
            f"The end of that run's output:\n```text\n{fenced}\n```"
        ),
    )


class FinalCheck:
    """The final check of one run (`ctx`): its trees live under the run's folder."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.scratch = Scratch(ctx.integration.merge_tree(ctx.root / "final-tree"), runner=ctx.runner)
        self.tip = ""

    def due(self, tip: str) -> bool:
        """Something merged and the tip was not looked at yet."""
        state = self.ctx.state
        assert state.started is not None
        checked = state.final_checks[-1].tip if state.final_checks else state.started.base
        return tip != checked

    async def check(self, tip: str) -> list[ev.FleetEvent]:
        """Run the suite at base (unless the log has it) and at `tip` (again, if something new failed
        there); the events to record: the base's result, the check, and a repair task if one is due."""
        ctx, state = self.ctx, self.ctx.state
        assert state.started is not None and state.plan is not None
        self.tip = tip
        command = ctx.settings.commands.test
        events: list[ev.FleetEvent] = []
        base = state.final_base
        if base is None or base.base != state.started.base or base.command != command:
            ran = Suite.of(await self._run(state.started.base))
            base = ev.FinalBase(base=state.started.base, command=command, ok=ran.ok,
                                failing=list(ran.failing), gathered=ran.gathered)  # fmt: skip
            events.append(base)
        at_base = Suite(base.ok, tuple(base.failing), base.gathered)
        first = Suite.of(await self._run(tip))
        again = None
        if compare(at_base, first, None).new:
            again = Suite.of(await self._run(tip))
        found = compare(at_base, first, again)
        passing = await self._given_up_that_pass(tip, state.started.base)
        round_ = len(state.final_checks) + 1
        repairs = sum(1 for c in state.final_checks if c.repair)
        repair = None
        if found.new and repairs < ctx.settings.fleet.final_repair_rounds:
            repair = repair_task(state.plan, round_, found.new, command, (again or first).output)
        events.append(  # one event: a run killed after it still has its repair task (the fold adds it)
            ev.FinalChecked(
                round=round_, base=state.started.base, tip=tip, command=command,
                new=list(found.new), flaky=list(found.flaky), preexisting=list(found.preexisting),
                gathered=first.gathered, output=(again or first).output if found.new else "",
                repair=repair.id if repair else "",
                repair_task=repair.model_dump(mode="json") if repair else {}, passing=passing,
            )
        )  # fmt: skip
        return events

    def settled(self, finished: asyncio.Task[list[ev.FleetEvent]]) -> list[ev.FleetEvent]:
        """`check`'s events; when a harness step failed (git, the disk), a check that says so (the
        tip counts as looked at: the run goes on to its end)."""
        error = finished.exception()
        if error is None:
            return finished.result()
        state = self.ctx.state
        assert state.started is not None
        return [
            ev.FinalChecked(
                round=len(state.final_checks) + 1, base=state.started.base, tip=self.tip,
                command=self.ctx.settings.commands.test, error=f"{type(error).__name__}: {error}",
            )
        ]  # fmt: skip

    async def _given_up_that_pass(self, tip: str, base: str) -> list[str]:
        """The tasks given up (they need the person, the lead marked them impossible, or they wait on
        such a task) whose own check passes in the tip's tree and fails at the run's base: another
        task's merge fixed what they were about (a check that passed at base too says nothing of the
        kind)."""
        state = self.ctx.state
        given_up = {
            task_id: state.task(task_id).verify
            for task_id, task_state in state.states.items()
            if task_state.status in GIVEN_UP and state.task(task_id).verify
        }
        if not given_up:
            return []
        await self.scratch.reset(tip)
        at_tip = [task_id for task_id, verify in given_up.items() if (await self.scratch.run(verify)).ok]
        if not at_tip:
            return []
        await self.scratch.reset(base)
        return [task_id for task_id in at_tip if not (await self.scratch.run(given_up[task_id])).ok]

    async def _run(self, commit: str) -> CommandRun:
        await self.scratch.reset(commit)
        return await self.scratch.run(self.ctx.settings.commands.test)

    async def close(self) -> None:
        await self.scratch.remove()


def summary(check: ev.FinalChecked | None) -> list[str]:
    """The run's final-check lines for the person (its summary, the PR description)."""
    if check is None:
        return []
    where = f"the whole suite (`{check.command}`) on a clean checkout of {check.tip[:12]}"
    if check.error:
        return [f"final check: {where} could not run: {check.error}"]
    if not (check.new or check.flaky or check.preexisting):
        return [f"final check: {where}: green"]
    lines = [f"final check: {where}:"]
    for label, tests in (
        ("NEW failures (they passed at base)", check.new),
        ("flaky (failed, then passed when run again)", check.flaky),
        ("failing at base too (not this run's)", check.preexisting),
    ):
        if tests:
            shown = ", ".join(tests[:10]) + (f" and {len(tests) - 10} more" if len(tests) > 10 else "")
            lines.append(f"  {label}: {shown}")
    return lines
