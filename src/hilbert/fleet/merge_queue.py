"""The merge queue: accepted branches land on the integration branch only through commits that passed.

`MergeQueue.submit(Candidate)` queues an accepted task whose branch is already fetched into the
integration repository; `await process()` takes up to `max_batch` of them and returns one `Outcome` per
candidate taken:

1. Build: merge each candidate (`merge --no-ff`, see below) onto the integration tip in the scratch
   tree. A conflict goes back at once as `Outcome("conflict", hunks=...)` and leaves the batch.
2. Check once: every remaining candidate's `verify`, then the project's `test_command`, on the combined
   result (fail fast). A failing command is re-run once; passing then is recorded as `flaky_test`
   with both outputs and counts as green.
3. Green: `update-ref <branch> <result> <old tip>`, so a concurrent move of the branch is refused; the
   candidates are `merged`. If refused, the not-yet-landed candidates go back to the front of the
   queue (`requeued`) and the next `process()` rebuilds them on the new tip.
4. Red: bisect to one culprit. Test the left half on the tip; green → land it, and the right half is
   known red on the new tip (it is the same merge sequence that failed), so it is split without a
   run; red → keep bisecting the left half, the right half waits. A green left half whose right half
   is one candidate waits for step 5 before it lands. What was not landed or rejected is retried as a
   fresh batch (back to step 1).
5. Blame: the lone known-red candidate is `rejected` with the failing output and, when the test
   command names its failures, the tests that fail with it and pass on its base (`new_failures`,
   typed: what its next attempt is told first), unless earlier
   candidates of the same batch were merged before it (landed, or the waiting left half) and it
   passes the checks alone on the batch's base: then it fails only together with one of them, found
   by bisecting the shortest prefix of them that turns it red, and it is not blamed alone —
   `rejected` with `with_tasks` naming that partner (typed, in `merge_rejected`; `fleet.outcomes`
   escalates it to the lead rather than retrying it). A partner that already landed stays (the branch
   never moves back); one in the waiting half does not land and is rejected with it, each naming the
   other, and the rest of that half is retried. Test-command runs, the flakiness re-run included: a
   green batch 1; one culprit among 8 6–7 (the alone run costs 1 when anything preceded it); a pair
   failing together among n about 2·log2(n) + 3; k culprits about k·(log2(n) + 3) + 1.

Merge, not rebase: `merge --no-ff` keeps the worker's commits byte-for-byte (the shas the harness
recorded and archived stay true), conflicts are found once per candidate rather than once per replayed
commit, and each task lands as one first-parent commit that `git revert -m 1` can undo alone.

Only the confirmed batch-level red is re-run for flakiness; red runs inside a bisection are not
(the batch's failure was already confirmed), so a flaky test inside a bisection could blame the wrong
half. The branch still only moves to commits whose checks passed.

Every step is reported through `record(event)`, a typed record of `hilbert.fleet.events`; the move of
the branch is logged before it happens (`merge_landing`) and after (`merged`, one per candidate).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hilbert.commands import Runner
from hilbert.fleet import events as ev
from hilbert.fleet.merge_checks import Build, Candidate, CommandRun, Scratch
from hilbert.workspaces.integration import Integration

__all__ = ["Candidate", "MergeQueue", "Outcome"]

# pytest's last line when tests failed and the run went to the end: "2 failed, 29 passed in 0.22s"

OutcomeKind = Literal["merged", "conflict", "rejected", "requeued"]


@dataclass(frozen=True)
class Outcome:
    """What became of one candidate: merged at `commit`, conflict with `hunks`, or rejected with `output`."""

    task_id: str
    kind: OutcomeKind
    commit: str | None = None
    hunks: str = ""
    output: str = ""
    with_tasks: tuple[str, ...] = ()  # rejected: the candidates it fails only together with
    new_failures: tuple[str, ...] = ()  # rejected: the test ids failing in the build, passing at its base


@dataclass(frozen=True)
class CheckResult:
    """The checks on one build: `failed` is the (confirmed) failing run, None when green; `new_failures`
    the tests it failed that pass on the build's base (empty when that is not known: another command
    failed, or the test runner did not name its failures)."""

    commit: str
    failed: CommandRun | None
    new_failures: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failed is None


@dataclass
class _Attempt:
    """Mutable state of one `process()` call: the tip it believes in and what it decided so far."""

    tip: str
    base: str  # the tip the batch started on: a suspect is tested alone there
    outcomes: list[Outcome] = field(default_factory=list)
    landed: list[Candidate] = field(default_factory=list)  # of this batch, in merge order
    moved: str = ""  # why the fast-forward was refused, if it was


class MergeQueue:
    """Lands accepted candidates on the branch of `integration`, batched, checked and bisected; builds and
    checks in a merge tree at `scratch`."""

    def __init__(
        self,
        integration: Integration,
        scratch: Path,
        *,
        test_command: str,
        record: Callable[[ev.FleetEvent], object],
        runner: Runner,
        max_batch: int = 8,
        pending: Sequence[Candidate] = (),
        crash: Callable[[str], None] = lambda point: None,
    ) -> None:
        self.integration = integration
        self.test_command = test_command
        self.record = record
        self.max_batch = max(1, max_batch)
        self._scratch = Scratch(integration.merge_tree(scratch), runner=runner)
        self._queue: deque[Candidate] = deque(pending)  # a resumed run's candidates still waiting
        self.crash = crash  # test only: named crash points (`hilbert.fleet.crash`)
        # tip sha -> the tests failing there (None: not known; its run did not report test by test to its end)
        self._baselines: dict[str, frozenset[str] | None] = {}

    @property
    def pending(self) -> tuple[Candidate, ...]:
        return tuple(self._queue)

    def submit(self, candidate: Candidate) -> None:
        self._queue.append(candidate)

    async def close(self) -> None:
        """Remove the scratch tree and its git dir; queued candidates stay queued."""
        await self._scratch.remove()

    async def process(self) -> list[Outcome]:
        """Take up to `max_batch` queued candidates and land, reject or send back each of them."""
        batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
        if not batch:
            return []
        tip = await self.integration.tip()
        self.record(ev.MergeBatchStarted(tasks=_ids(batch), base=tip))
        attempt = _Attempt(tip=tip, base=tip)
        pending = batch
        while pending and not attempt.moved:
            pending = await self._land(attempt, pending)
        if attempt.moved and pending:
            self._queue.extendleft(reversed(pending))
            self.record(ev.MergeRequeued(tasks=_ids(pending), base=attempt.tip, reason=attempt.moved))
            attempt.outcomes += [Outcome(c.task_id, "requeued") for c in pending]
        return attempt.outcomes

    async def _land(self, attempt: _Attempt, candidates: list[Candidate]) -> list[Candidate]:
        """One round on a fresh batch; returns the candidates still undecided."""
        build = await self._build(attempt, candidates)
        if not build.merged:
            return []
        check = await self._check(build, confirm=True)
        if check.ok:
            return [] if await self._advance(attempt, build) else list(build.merged)
        return await self._bisect(attempt, list(build.merged), check)

    async def _bisect(
        self, attempt: _Attempt, suspects: list[Candidate], red: CheckResult
    ) -> list[Candidate]:
        """Find one culprit among `suspects` (known red on the tip); returns the untested rest."""
        rest: list[Candidate] = []
        waiting: Build | None = None  # a green left half whose right half is the culprit: step 5 first
        while len(suspects) > 1:
            middle = len(suspects) // 2
            left, right = suspects[:middle], suspects[middle:]
            self.record(ev.MergeBisect(suspects=_ids(suspects), testing=_ids(left), base=attempt.tip))
            build = await self._build(attempt, left)
            if build.conflicts:  # cannot happen for a prefix of a clean sequence; retry afresh if it does
                return list(build.merged) + right + rest
            check = await self._check(build, confirm=False)
            if not check.ok:
                suspects, red, rest = left, check, right + rest
            elif len(right) == 1:
                suspects, waiting = right, build
            elif not await self._advance(attempt, build):
                return suspects + rest
            else:
                suspects = right  # tip + right now replays exactly the sequence that failed
        return await self._blame(attempt, suspects[0], red, waiting) + rest

    async def _blame(
        self, attempt: _Attempt, culprit: Candidate, red: CheckResult, waiting: Build | None
    ) -> list[Candidate]:
        """`culprit` is red on the tip after `waiting`'s candidates: rejected alone, or with the earlier
        candidate it fails only together with (step 5); `waiting` lands unless it holds that partner.
        Returns the candidates to retry."""
        held = list(waiting.merged) if waiting is not None else []
        earlier = attempt.landed + held
        partner = await self._partner(attempt, culprit, earlier) if earlier else None
        if partner is not None and partner in held:  # neither lands; the rest of the half is retried
            self._reject(attempt, partner, red, with_tasks=(culprit.task_id,))
            self._reject(attempt, culprit, red, with_tasks=(partner.task_id,))
            return [c for c in held if c != partner]
        if waiting is not None and not await self._advance(attempt, waiting):
            return [*held, culprit]
        self._reject(attempt, culprit, red, with_tasks=(partner.task_id,) if partner is not None else ())
        return []

    async def _partner(
        self, attempt: _Attempt, culprit: Candidate, earlier: list[Candidate]
    ) -> Candidate | None:
        """The candidate of `earlier` (merged before `culprit`, together known red) with which `culprit`
        fails: the last of the shortest prefix that turns it red. None: it fails alone on the batch's base."""
        suspects = _ids([*earlier, culprit])
        if not await self._passes(attempt, [culprit], suspects):
            return None
        green, red = 0, len(earlier)
        while red - green > 1:
            middle = (green + red) // 2
            if await self._passes(attempt, [*earlier[:middle], culprit], suspects):
                green = middle
            else:
                red = middle
        return earlier[red - 1]

    async def _passes(self, attempt: _Attempt, candidates: list[Candidate], suspects: list[str]) -> bool:
        """Whether `candidates` merge onto the batch's base and pass the checks there (one run, nothing
        lands; a conflict counts as red)."""
        self.record(ev.MergeBisect(suspects=suspects, testing=_ids(candidates), base=attempt.base))
        build = await self._scratch.build(attempt.base, candidates)
        return not build.conflicts and (await self._check(build, confirm=False)).ok

    def _reject(
        self, attempt: _Attempt, candidate: Candidate, red: CheckResult, *, with_tasks: tuple[str, ...]
    ) -> None:
        failed = red.failed
        assert failed is not None
        self.record(
            ev.MergeRejected(
                task=candidate.task_id,
                ref=candidate.ref,
                command=failed.command,
                exit=failed.returncode,
                output=failed.output,
                tested_commit=red.commit,
                with_tasks=list(with_tasks),
                new_failures=list(red.new_failures),
            )
        )
        attempt.outcomes.append(
            Outcome(
                candidate.task_id,
                "rejected",
                output=failed.output,
                with_tasks=with_tasks,
                new_failures=red.new_failures,
            )
        )

    async def _build(self, attempt: _Attempt, candidates: list[Candidate]) -> Build:
        build = await self._scratch.build(attempt.tip, candidates)
        for conflict in build.conflicts:
            cand = conflict.candidate
            self.record(
                ev.MergeConflict(
                    task=cand.task_id,
                    ref=cand.ref,
                    base=attempt.tip,
                    files=list(conflict.files),
                    hunks=conflict.hunks,
                )
            )
            attempt.outcomes.append(Outcome(cand.task_id, "conflict", hunks=conflict.hunks))
        return build

    async def _check(self, build: Build, *, confirm: bool) -> CheckResult:
        """Run every candidate's verify, then the test command; `confirm` re-runs a failure once."""
        commands = [c.verify for c in build.merged if c.verify.strip()] + [self.test_command]
        tasks = _ids(build.merged)
        for command in commands:
            run = await self._scratch.run(command)
            if run.ok:
                continue
            new = await self._new_failures(build, run) if command == self.test_command else None
            if new is not None and not new:
                continue
            if confirm:
                again = await self._scratch.run(command)
                if again.ok:
                    self.record(
                        ev.FlakyTest(
                            tasks=tasks,
                            commit=build.commit,
                            command=command,
                            first_exit=run.returncode,
                            first_output=run.output,
                            second_output=again.output,
                        )
                    )
                    continue
            self.record(
                ev.MergeChecksFailed(
                    tasks=tasks,
                    commit=build.commit,
                    command=command,
                    exit=run.returncode,
                    timed_out=run.timed_out,
                    output=run.output,
                    confirmed=confirm,
                    new_failures=sorted(new or ()),
                )
            )
            return CheckResult(build.commit, run, tuple(sorted(new or ())))
        self.record(ev.MergeChecksPassed(tasks=tasks, commit=build.commit, commands=commands))
        return CheckResult(build.commit, None)

    async def _new_failures(self, build: Build, run: CommandRun) -> frozenset[str] | None:
        """The tests the failed `run` of the test command fails that pass on the build's base; None
        when that cannot be told. A project whose tests already fail on the integration tip (a fleet is
        often there to fix them) cannot demand a green suite from each merge: the bar is *no new
        failures* (an empty set: the checks pass). That needs a test runner whose failures the judge's
        reporter saw, test by test, in sessions that all ran to their end (`CommandRun.ran_to_the_end`:
        pytest, also under a wrapper such as `make check`). With any other runner or outcome the
        command must pass. The failures new since base are what a rejected worker is told first."""
        failing = run.failures
        if not failing or not run.ran_to_the_end:
            return None
        if build.base not in self._baselines:
            await self._scratch.reset(build.base)
            baseline = await self._scratch.run(self.test_command)
            self._baselines[build.base] = baseline.failures if baseline.ran_to_the_end else None
            await self._scratch.reset(build.commit)
        before = self._baselines[build.base]
        if before is None:
            return None
        if not failing <= before:
            return failing - before
        self._baselines[build.commit] = failing  # the next batch's baseline, if this one lands
        self.record(
            ev.MergeChecksBaseline(
                commit=build.commit,
                base=build.base,
                still_failing=sorted(failing),
                fixed=sorted(before - failing),
            )
        )
        return frozenset()

    async def _advance(self, attempt: _Attempt, build: Build) -> bool:
        """Fast-forward the branch to the checked build unless someone moved it; False if refused. The
        intent is logged first (`merge_landing`), so that a resume can tell a ref that moved without
        its `merged` events from one that never moved."""
        tasks, refs = _ids(build.merged), [c.ref for c in build.merged]
        self.record(ev.MergeLanding(tasks=tasks, refs=refs, commit=build.commit, old=attempt.tip))
        self.crash("after_landing_logged")
        refused = await self.integration.land(build.commit, attempt.tip)
        self.crash("after_ref_moved")
        if refused is not None:
            attempt.moved = refused
            return False
        attempt.tip = build.commit
        attempt.landed += build.merged
        for cand in build.merged:
            self.record(ev.Merged(task=cand.task_id, ref=cand.ref, commit=build.commit))
            attempt.outcomes.append(Outcome(cand.task_id, "merged", commit=build.commit))
        return True


def _ids(candidates: list[Candidate] | tuple[Candidate, ...]) -> list[str]:
    return [c.task_id for c in candidates]
