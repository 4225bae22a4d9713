"""The run's integration repository: every git call the harness makes on it lives here.

`Integration.create(source, path, git)` makes it: a bare clone of the person's repository (which is
only read) under the run's folder, with the branch `hilbert/integration` at the source's HEAD. A HEAD
with submodules (gitlinks) is refused first, in one line (`refuse_submodules`): the harness does not
materialise them, and no git it runs looks into a nested repository. The
branch only ever moves through `land(new, old)` — `update-ref` with the old value, so a concurrent move
is refused rather than overwritten — to commits whose checks passed (the merge queue decides which).
`tip()` is where the branch is; `receive(git_dir, branch, ref)` copies a worker's branch in as a
candidate ref, `contains(commit)` says whether a commit has landed. (`hilbert.context.repomap` reads
any repository's objects, this one's
included, through the same `Git`; it writes nothing.)

`MergeTree` is the merge queue's scratch work tree of it, where merges are built and the project's
checks (workers' code, sandboxed, the tree writable) run: `reset(commit)`, `merge(ref, message)` with
`--no-ff` (a conflict comes back with the conflicting hunks, the merge aborted), `head()`, `remove()`.
The tree holds no `.git` entry: its git dir is a folder beside it (`<tree>.git`: `HEAD`, the index and
a `commondir` naming this repository, so objects, refs and config are the repository's), and every git
call names `--git-dir` and `--work-tree`, so nothing a check wrote in the tree (a `.git` file pointing
at a git dir with filters or another `core.worktree`) steers the harness's git. `reset` does not reset
in place: the tree and the index are deleted and the commit checked out afresh.

What must not live here: deciding what to merge or land (`hilbert.fleet.merge_queue`), running the
project's commands in the tree (`hilbert.commands.Runner`).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from hilbert.errors import UserError
from hilbert.workspaces.git import Git, GitResult, one_line

INTEGRATION = "hilbert/integration"
HUNKS_CAP = 20_000  # characters of conflicting hunks kept for the worker


SNAPSHOT = "hilbert: a snapshot of the uncommitted changes the run started from (--allow-dirty)"


@dataclass(frozen=True)
class Merged:
    """One `merge --no-ff`: `ok`, or the files in conflict with their `hunks` (or git's own words)."""

    ok: bool
    files: tuple[str, ...] = ()
    hunks: str = ""


@dataclass(frozen=True)
class Integration:
    """The bare integration repository at `path`, its `branch` moved only by `land`."""

    path: Path
    git: Git
    branch: str = INTEGRATION

    @property
    def ref(self) -> str:
        return f"refs/heads/{self.branch}"

    @classmethod
    async def create(cls, source: Path, path: Path, git: Git) -> Integration:
        """A bare clone of `source` at `path`, the branch at its HEAD. A HEAD with submodules is
        refused (UserError) before anything is written: hilbert does not materialise them."""
        await refuse_submodules(source, git)
        await git.run("clone", "--bare", "--quiet", "--no-tags", Path(source).absolute(), path)
        await git.run("-C", path, "branch", INTEGRATION, "HEAD")
        return cls(Path(path).absolute(), git)

    async def snapshot(self, source: Path, ignores: Callable[[Path, Git], Awaitable[Git]]) -> str:
        """Commit `source`'s working tree as it is (tracked changes, untracked files that are not
        ignored; `ignores` gives the git that ignores as the person does) on top of the branch, and move
        the branch there: `--allow-dirty`. Nothing is written to `source`: the index is a copy (never
        split), the new objects go into this repository (the source's own are read as alternates).
        Returns the new tip."""
        source = Path(source).absolute()
        git_dir = Path((await self.git.run("rev-parse", "--absolute-git-dir", cwd=source)).stdout.strip())
        index = self.path / "snapshot.index"
        found = (await self.git.run("rev-parse", "--git-path", "index", cwd=source)).stdout.strip()
        if (source / found).is_file():  # `found` is relative to `source`, or absolute
            index.write_bytes((source / found).read_bytes())
        env = {
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": str(source),
            "GIT_INDEX_FILE": str(index),
            "GIT_OBJECT_DIRECTORY": str(self.path / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(git_dir / "objects"),
        }
        git = replace(await ignores(source, self.git), config=(*self.git.config, "core.splitIndex=false"))
        try:
            await git.run("add", "-A", cwd=source, extra_env=env)
            tree = (await git.run("write-tree", cwd=source, extra_env=env)).stdout.strip()
        finally:
            index.unlink(missing_ok=True)
        listed = await self.git.run("ls-tree", "-r", tree, cwd=self.path)
        nested = [line.split("\t", 1)[1] for line in listed.stdout.splitlines() if line.startswith("160000 ")]
        if nested:  # an untracked repository inside the tree: the workers would get an empty folder
            raise UserError(
                f"the uncommitted changes hold a nested git repository ({nested[0]}): hilbert does not "
                "carry one into a snapshot",
                hint="move it out, ignore it, or commit the work you want the run to see",
            )
        parent = await self.tip()
        commit = (
            await self.git.run("commit-tree", tree, "-p", parent, "-m", SNAPSHOT, cwd=self.path)
        ).stdout.strip()
        await self.git.run("update-ref", self.ref, commit, parent, cwd=self.path)
        return commit

    async def tip(self) -> str:
        """The commit the branch is at."""
        return (await self.git.run("rev-parse", "--verify", self.ref, cwd=self.path)).stdout.strip()

    async def land(self, new: str, old: str) -> str | None:
        """Move the branch from `old` to `new`; None when it moved, else why git refused (it moved)."""
        moved = await self.git.run(
            "update-ref", "-m", "hilbert merge queue", self.ref, new, old, cwd=self.path, check=False
        )
        if moved.returncode == 0:
            return None
        return f"fast-forward of {self.ref} to {new} refused: {one_line(moved.stderr)}"

    async def receive(self, git_dir: Path, branch: str, ref: str) -> None:
        """Copy `branch` of the repository at `git_dir` (a worker's) in as `ref` (forced: the caller
        owns `ref`, a full ref name)."""
        if not ref.startswith("refs/"):
            raise UserError(f"ref {ref!r} must be a full ref name", hint="e.g. refs/hilbert/queue/<worker>")
        await self.git.run("check-ref-format", ref)
        await self.git.run(
            "-C", self.path, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
            Path(git_dir).absolute(), f"+{branch}:{ref}",
        )  # fmt: skip

    async def contains(self, commit: str, ref: str | None = None) -> bool:
        """Whether `commit` is reachable from `ref` (default: the integration branch); False also when
        this repository lacks the commit."""
        found = await self.git.run(
            "-C", self.path, "merge-base", "--is-ancestor", commit, ref or self.ref, check=False
        )
        return found.returncode == 0

    def merge_tree(self, path: Path) -> MergeTree:
        return MergeTree(self, Path(path).absolute())


@dataclass(frozen=True)
class MergeTree:
    """The merge queue's work tree of `integration` at `path`, its git dir `git_dir` beside it."""

    integration: Integration
    path: Path

    @property
    def git_dir(self) -> Path:
        return self.path.with_name(self.path.name + ".git")

    async def _git(self, *args: str | Path, check: bool = True) -> GitResult:
        return await self.integration.git.run(
            f"--git-dir={self.git_dir}", f"--work-tree={self.path}", *args, cwd=self.git_dir, check=check
        )

    async def reset(self, commit: str) -> None:
        """The tree at `commit`, rebuilt: nothing a check wrote survives, nothing it planted is read."""
        where = self.git_dir if (self.git_dir / "HEAD").exists() else self.integration.path
        found = await self.integration.git.run(
            f"--git-dir={where}", "rev-parse", "--verify", f"{commit}^{{commit}}", cwd=where
        )
        sha = found.stdout.strip()
        await asyncio.to_thread(_wipe, self.path)
        self.git_dir.mkdir(parents=True, exist_ok=True)
        (self.git_dir / "commondir").write_text(f"{self.integration.path}\n")
        (self.git_dir / "HEAD").write_text(f"{sha}\n")
        for leftover in ("index", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "ORIG_HEAD"):
            (self.git_dir / leftover).unlink(missing_ok=True)
        self.path.mkdir(parents=True)
        await self._git("reset", "--quiet", "--hard", sha)

    async def merge(self, ref: str, message: str) -> Merged:
        """`merge --no-ff ref`; a conflict is aborted and comes back with its hunks."""
        result = await self._git("merge", "--no-ff", "--no-edit", "-m", message, ref, check=False)
        if result.returncode == 0:
            return Merged(True)
        names = await self._git("diff", "--name-only", "--diff-filter=U", check=False)
        files = tuple(line for line in names.stdout.splitlines() if line)
        if files:
            hunks = _cap((await self._git("diff", "--", *files, check=False)).stdout)
        else:  # not a content conflict (e.g. an unknown ref): git's own words are the message
            hunks = f"git could not merge {ref}: {one_line(result.stdout + result.stderr)}"
        await self._git("merge", "--abort", check=False)
        await self.reset(await self.head())
        return Merged(False, files, hunks)

    async def head(self) -> str:
        return (await self._git("rev-parse", "HEAD")).stdout.strip()

    async def remove(self) -> None:
        """Delete the tree and its git dir (the merge commits stay in the repository's objects)."""
        await asyncio.to_thread(_wipe, self.path)
        await asyncio.to_thread(_wipe, self.git_dir)


def _wipe(path: Path) -> None:
    """`path` gone, whatever it is: a link is unlinked (never followed), a folder removed with what is
    in it (links inside are removed, not followed)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


async def refuse_submodules(source: Path, git: Git) -> None:
    """A UserError naming them when `source`'s HEAD holds gitlinks (submodules): a worker's checkout
    would hold empty folders where they are, and git looking into one would run its configuration."""
    listing = await git.run("-C", Path(source).absolute(), "ls-tree", "-r", "-z", "HEAD", check=False)
    found = [entry.split("\t", 1)[1] for entry in listing.stdout.split("\0") if entry.startswith("160000 ")]
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise UserError(
            f"{source} has submodules ({shown}), which hilbert does not run on",
            hint="run on a repository without submodules (e.g. vendor their files as plain files)",
        )


def _cap(text: str) -> str:
    if len(text) <= HUNKS_CAP:
        return text
    return f"[... {len(text) - HUNKS_CAP} characters cut ...]\n" + text[-HUNKS_CAP:]


__all__ = ["INTEGRATION", "Integration", "MergeTree", "Merged"]
