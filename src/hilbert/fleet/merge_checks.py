"""The merge queue's hands: one scratch work tree where candidates are merged onto a base and checked.

`Scratch` is a `git worktree` of the integration repository (the harness's own, never a worker's), kept
detached. `build(base, candidates)` resets it to `base` (hard reset plus `clean -ffdx`, so nothing a
previous check wrote survives) and merges each candidate with `merge --no-ff`, in order; a candidate that
conflicts is recorded with the conflicting hunks (`git diff` of the unmerged paths, markers included),
the merge is aborted and the next candidate goes on. `run(command)` runs one shell command in the tree
with a timeout, its own process group (killed whole on timeout) and no inherited `GIT_*` variables.

What must not live here: deciding what to batch, bisect, accept or reject (that is `merge_queue`), and
moving the integration branch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hilbert.agent.tools import command_env
from hilbert.security.sandbox import Sandbox
from hilbert.workspaces.git import Git, GitResult, one_line

OUTPUT_CAP = 20_000


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
    """A detached worktree of `repo` at `path` in which the queue builds and checks merges. Its commands
    (the project's tests: workers' code) run in `sandbox` when there is one, only the tree writable."""

    def __init__(
        self,
        repo: Path,
        path: Path,
        git: Git,
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.repo = Path(repo).absolute()
        self.path = Path(path).absolute()
        self.git = git
        self.timeout_s = timeout_s
        self.env = {k: v for k, v in command_env(env).items() if not k.startswith("GIT_")}
        self.sandbox = sandbox

    async def _git(self, *args: str | Path, check: bool = True) -> GitResult:
        return await self.git.run(*args, cwd=self.path, check=check)

    async def ensure(self, base: str) -> None:
        """Create the worktree at `base` unless it is already there."""
        if (self.path / ".git").exists():
            return
        await self.git.run("worktree", "prune", cwd=self.repo)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await self.git.run("worktree", "add", "--detach", self.path, base, cwd=self.repo)

    async def remove(self) -> None:
        """Unregister and delete the worktree (the merge commits stay in the repository's objects)."""
        if (self.path / ".git").exists():
            await self.git.run("worktree", "remove", "--force", self.path, cwd=self.repo)
        await self.git.run("worktree", "prune", cwd=self.repo)

    async def reset(self, commit: str) -> None:
        await self._git("reset", "--quiet", "--hard", commit)
        await self._git("clean", "-ffdxq")

    async def build(self, base: str, candidates: list[Candidate] | tuple[Candidate, ...]) -> Build:
        """Merge `candidates` onto `base` one by one; conflicting ones are left out with their hunks."""
        await self.ensure(base)
        await self.reset(base)
        merged: list[Candidate] = []
        conflicts: list[Conflict] = []
        for cand in candidates:
            message = f"merge {cand.task_id} ({cand.ref})"
            result = await self._git("merge", "--no-ff", "--no-edit", "-m", message, cand.ref, check=False)
            if result.returncode == 0:
                merged.append(cand)
                continue
            conflicts.append(await self._conflict(cand, result.stdout + result.stderr))
            await self._git("merge", "--abort", check=False)
            await self.reset("HEAD")
        head = (await self._git("rev-parse", "HEAD")).stdout.strip()
        return Build(base=base, commit=head, merged=tuple(merged), conflicts=tuple(conflicts))

    async def _conflict(self, cand: Candidate, message: str) -> Conflict:
        names = await self._git("diff", "--name-only", "--diff-filter=U", check=False)
        files = tuple(line for line in names.stdout.splitlines() if line)
        if not files:  # not a content conflict (e.g. an unknown ref): git's own words are the message
            return Conflict(cand, (), f"git could not merge {cand.ref}: {one_line(message)}")
        diff = await self._git("diff", "--", *files, check=False)
        return Conflict(cand, files, _cap(diff.stdout))

    async def run(self, command: str) -> CommandRun:
        """Run `bash -c command` in the scratch tree, killing its whole process group on timeout."""
        argv = ["bash", "-c", command]
        try:
            argv = self.sandbox.wrap(argv, self.path, self.path) if self.sandbox else argv
        except PermissionError as refused:
            return CommandRun(command=command, returncode=126, output=str(refused), timed_out=False)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.path,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = await proc.communicate()
        except BaseException:  # cancelled: kill the whole group and reap it before going
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(proc.wait())
            raise
        text = out.decode("utf-8", "replace")
        if timed_out:
            text += f"\n[hilbert: killed after {self.timeout_s:g}s]"
        code = proc.returncode if proc.returncode is not None else -1
        failures = frozenset(_FAILURE_LINE.findall(text))  # from the whole output, before it is capped
        return CommandRun(
            command=command, returncode=code, output=_cap(text), timed_out=timed_out, failures=failures
        )


_FAILURE_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    return f"[... {len(text) - OUTPUT_CAP} characters cut ...]\n" + text[-OUTPUT_CAP:]
