"""The merge queue's hands: builds merges of candidates in the integration repository's merge tree and
runs the checks there.

`Scratch(tree, runner)`: `build(base, candidates)` resets the tree (`hilbert.workspaces.integration.
MergeTree`) to `base` and merges each candidate with `merge --no-ff`, in order; a candidate that conflicts
is recorded with the conflicting hunks, and the next one goes on. `run(command)` runs one shell command
in the tree through the run's `Runner` (its sandbox, only the tree writable; `timeouts.merge_s`).

What must not live here: deciding what to batch, bisect, accept or reject (that is `merge_queue`), git
(that is `hilbert.workspaces.integration`), and moving the integration branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hilbert.commands import Output, Runner, merge_timeout
from hilbert.workspaces.integration import MergeTree

OUTPUT_CAP = 20_000
WHOLE_OUTPUT = 8_000_000  # bytes kept at each end: a test run's FAILED lines are read from all of it


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
    failures: frozenset[str] = frozenset()  # test ids a pytest-style runner reported FAILED / ERROR

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


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
        done = await self.runner.run(
            command,
            root=self.path,
            timeout=merge_timeout(self.runner.timeouts),
            output=Output(WHOLE_OUTPUT, lambda: None),
        )
        text = done.text(self.path)
        failures = frozenset(_FAILURE_LINE.findall(text))  # from the whole output, before it is capped
        code = done.exit_code if done.exit_code is not None else -1
        return CommandRun(
            command=command, returncode=code, output=_cap(text), timed_out=done.timed_out, failures=failures
        )


_FAILURE_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    return f"[... {len(text) - OUTPUT_CAP} characters cut ...]\n" + text[-OUTPUT_CAP:]
