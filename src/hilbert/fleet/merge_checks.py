"""The merge queue's hands: builds merges of candidates in the integration repository's merge tree and
runs the checks there.

`Scratch(tree, runner)`: `build(base, candidates)` resets the tree (`hilbert.workspaces.integration.
MergeTree`) to `base` and merges each candidate with `merge --no-ff`, in order; a candidate that conflicts
is recorded with the conflicting hunks, and the next one goes on. `run(command)` runs one shell command
in the tree through the run's `Runner` (its sandbox, only the tree writable; `timeouts.merge_s`), with
the judge's reporter gathering pytest's outcomes itself (`hilbert.judge.testruns`): which tests failed
is read from there, never from the output, and a run whose pytest reported a failure or ended without
its end-of-session record fails even if a conftest turned the exit status into 0.

What must not live here: deciding what to batch, bisect, accept or reject (that is `merge_queue`), git
(that is `hilbert.workspaces.integration`), and moving the integration branch.
"""

from __future__ import annotations

from dataclasses import dataclass

from hilbert.commands import Output, Runner, merge_timeout
from hilbert.judge.testruns import Controls, run_tests
from hilbert.workspaces.integration import MergeTree

OUTPUT_CAP = 20_000
WHOLE_OUTPUT = 400_000  # bytes kept at each end before the output is capped


@dataclass(frozen=True)
class Candidate:
    """An accepted task's work: `ref` is already fetched into the integration repository."""

    task_id: str
    ref: str
    verify: str


@dataclass(frozen=True)
class Conflict:
    """A candidate that did not merge onto the base; `hunks` is what goes back to the worker."""

    candidate: Candidate
    files: tuple[str, ...]
    hunks: str


@dataclass(frozen=True)
class Build:
    """The result of merging candidates onto `base`: `commit` is the tree the checks run on."""

    base: str
    commit: str
    merged: tuple[Candidate, ...]
    conflicts: tuple[Conflict, ...]


@dataclass(frozen=True)
class CommandRun:
    """One shell command's run in the scratch tree (`output` is stdout+stderr, tail-capped)."""

    command: str
    returncode: int
    output: str
    timed_out: bool
    failures: frozenset[str] = frozenset()  # test ids pytest's reporter saw fail (a phase raised)
    gathered: bool = False  # a pytest session reported its outcomes
    finished: bool = False  # ... and every session that started recorded its end

    @property
    def ok(self) -> bool:
        reported = not self.gathered or (self.finished and not self.failures)
        return self.returncode == 0 and not self.timed_out and reported

    @property
    def ran_to_the_end(self) -> bool:
        """pytest ran every session to its end and named the tests that failed."""
        return self.gathered and self.finished and not self.timed_out


class Scratch:
    """The merge tree in which the queue builds and checks merges. Its commands (the project's tests:
    workers' code) go through `runner`, only the tree writable."""

    def __init__(self, tree: MergeTree, *, runner: Runner) -> None:
        self.tree = tree
        self.path = tree.path
        self.runner = runner

    async def remove(self) -> None:
        await self.tree.remove()

    async def reset(self, commit: str) -> None:
        await self.tree.reset(commit)

    async def build(self, base: str, candidates: list[Candidate] | tuple[Candidate, ...]) -> Build:
        """Merge `candidates` onto `base` one by one; conflicting ones are left out with their hunks."""
        await self.tree.reset(base)
        merged: list[Candidate] = []
        conflicts: list[Conflict] = []
        for cand in candidates:
            done = await self.tree.merge(cand.ref, f"merge {cand.task_id} ({cand.ref})")
            if done.ok:
                merged.append(cand)
            else:
                conflicts.append(Conflict(cand, done.files, done.hunks))
        return Build(
            base=base, commit=await self.tree.head(), merged=tuple(merged), conflicts=tuple(conflicts)
        )

    async def run(self, command: str) -> CommandRun:
        """Run `bash -c command` in the scratch tree (`timeouts.merge_s`)."""
        run = await run_tests(
            self.runner,
            command,
            self.path,
            Controls(),
            timeout=merge_timeout(self.runner.timeouts),
            output=Output(WHOLE_OUTPUT, lambda: None),
        )
        done, outcomes = run.ran, run.outcomes
        failures = frozenset(
            n for n, o in (outcomes.outcomes.items() if outcomes else ()) if o in ("failed", "incomplete")
        )
        return CommandRun(
            command=command,
            returncode=done.exit_code if done.exit_code is not None else -1,
            output=_cap(done.text(self.path)),
            timed_out=done.timed_out,
            failures=failures,
            gathered=outcomes is not None,
            finished=outcomes is not None and outcomes.finished,
        )


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    return f"[... {len(text) - OUTPUT_CAP} characters cut ...]\n" + text[-OUTPUT_CAP:]
