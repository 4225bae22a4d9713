"""Isolated per-worker checkouts: provision, commit on the worker's behalf, hand over, archive or remove.

Layout under the run's private folder `root` (which is never inside a workspace):

    root/workspaces/<worker>/     the work tree — the only place a worker writes; it has no `.git` entry
    root/git/<worker>.git/        the worker's own git dir: HEAD, index, config, refs, (no) hooks
    root/objects/<base-sha>/      read-only object snapshot of the base's history (see `snapshot`;
                                  strategy "snapshot" only)
    root/archive/                 bundles and tarballs of work that was kept at cleanup
    root/home/                    HOME for every git process

Each git dir is created with `git --git-dir=G --work-tree=W init --template=` (no sample hooks, no `.git`
file in W, `core.worktree` recorded for people who inspect it) and has exactly one ref,
`refs/heads/hilbert/<worker>` at the base: no remotes, no tags. Where its objects come from is the
strategy:

- "snapshot" (the default): borrowed read-only from the base's snapshot through
  `objects/info/alternates`; the cheapest in time and disk (`docs/bench.md`, "Workspaces").
- "clone" (the portable fallback): a private copy of exactly the base's history, fetched by sha from the
  repository (`git fetch --no-tags <repo> <sha>:refs/heads/hilbert/<worker>`, upload-pack over a pipe,
  so nothing is hard-linked or borrowed); no `root/objects/`, no alternates. Needs nothing but git.

A "snapshot" `Workspaces` switches itself to "clone" for the rest of its life, and says why in
`fallback_reason`, when the snapshot cannot be built (git fails, the folder cannot be written) or a
worker repository cannot see the base through its alternates. Either way the isolation is the same.

Every later git call names `--git-dir` and `--work-tree` explicitly, so nothing is discovered from the
work tree, and the harness flags (`hilbert.workspaces.git`) keep hooks, fsmonitor and global/system
config out, and nothing git does looks into a nested repository. The harness makes every commit and
moves every ref; a sandbox can therefore leave only `root/workspaces/<worker>/` writable.

A repository a worker makes below its work tree (`nested_repositories`: a `.git` folder, or a `.git`
file naming a git dir elsewhere) is left out of every commit, never recorded as a gitlink: git would
otherwise run `git status` inside it, under that repository's own config (filters, fsmonitor, another
work tree), whenever the harness read the work tree. Its files stay in the work tree and the archive;
the stop gate names it to the worker (`hilbert.judge.integrity.left_out_findings`).

One `Workspaces` object belongs to one event loop (it keeps per-base asyncio locks).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import tarfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hilbert.errors import ConfigError, RunError, UserError
from hilbert.workspaces.export import export_commit
from hilbert.workspaces.git import Git, GitResult
from hilbert.workspaces.integration import Integration
from hilbert.workspaces.snapshot import Snapshots, resolve_base

_WORKER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
HARNESS_DIR = ".hilbert"
STRATEGIES = ("snapshot", "clone")


@dataclass(frozen=True)
class Checkout:
    """One worker's checkout: where it writes, where its repository lives, its branch and base sha."""

    worker_id: str
    work_tree: Path
    git_dir: Path
    branch: str
    base: str

    @property
    def ref(self) -> str:
        return f"refs/heads/{self.branch}"


class Workspaces:
    """Provisions isolated checkouts of `repo` for workers, under the run's private folder `root`.

    `strategy` is "snapshot" (objects borrowed from a per-base snapshot) or "clone" (a private copy per
    worker). `self.strategy` is the one in use now; `self.fallback_reason` is None, or why a "snapshot"
    object switched to "clone"."""

    def __init__(self, root: Path, repo: Path, strategy: str = "snapshot", *, mark: str = "") -> None:
        if strategy not in STRATEGIES:
            raise ConfigError(
                f"unknown workspace strategy {strategy!r}",
                hint='use "snapshot" (the default: objects borrowed read-only from one pack per base) '
                'or "clone" (a private copy of the base\'s history per worker; needs nothing but git)',
            )
        self.root = Path(root).absolute()
        self.repo = Path(repo).absolute()
        self.git = Git(home=self.root / "home", mark=mark)  # the run's mark: `hilbert.commands.leftovers`
        self.strategy = strategy
        self.fallback_reason: str | None = None
        self._snapshots = Snapshots(self.git, self.repo, self.root / "objects")

    async def _worker_git(
        self, checkout: Checkout, *args: str | Path, check: bool = True, env: Mapping[str, str] = {}
    ) -> GitResult:
        return await self.git.run(
            f"--git-dir={checkout.git_dir}",
            f"--work-tree={checkout.work_tree}",
            *args,
            cwd=checkout.work_tree,
            check=check,
            extra_env=env,
        )

    async def provision(self, worker_id: str, base: str) -> Checkout:
        """Create `worker_id`'s work tree and private repository, branch `hilbert/<worker_id>` at `base`."""
        if not _WORKER_ID.match(worker_id) or ".." in worker_id or worker_id.endswith((".lock", ".")):
            raise UserError(
                f"bad worker id {worker_id!r}",
                hint="use letters, digits, '.', '_' and '-' (at most 64), starting with a letter or digit",
            )
        planned = self.existing(worker_id, base)
        if planned.work_tree.exists() or planned.git_dir.exists():
            raise RunError(
                f"worker {worker_id!r} already has a workspace at {planned.work_tree}",
                hint="archive_or_remove the old checkout first, or use a new worker id",
            )
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        checkout = self.existing(worker_id, await resolve_base(self.git, self.repo, base))
        if not (self.strategy == "snapshot" and await self._borrow(checkout)):
            await self._clone(checkout)
        return checkout

    def existing(self, worker_id: str, base: str) -> Checkout:
        """Where `worker_id`'s checkout (provisioned at `base`) lives: a run resumed after its
        orchestrator died finds its workers' checkouts here (they may be gone)."""
        work_tree, git_dir = self.root / "workspaces" / worker_id, self.root / "git" / f"{worker_id}.git"
        return Checkout(worker_id, work_tree, git_dir, f"hilbert/{worker_id}", base)

    async def _clone(self, checkout: Checkout) -> None:
        """Provision `checkout` with its own copy of exactly the base's history (fetched by sha)."""
        await self._init(checkout)
        await self._worker_git(
            checkout, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            "--update-head-ok", self.repo, f"{checkout.base}:{checkout.ref}",
        )  # fmt: skip
        await self._worker_git(checkout, "reset", "--hard", "--quiet", checkout.ref)

    async def _borrow(self, checkout: Checkout) -> bool:
        """Provision `checkout` with objects borrowed from the base's snapshot; False (and nothing left
        behind) after switching to "clone" because the snapshot cannot be built or borrowed from."""
        sha = checkout.base
        try:
            snapshot = await self._snapshots.ensure(sha)
        except (RunError, OSError) as err:
            self._fall_back(f"the object snapshot for {sha[:12]} could not be built ({err})")
            return False
        await self._init(checkout)
        info = checkout.git_dir / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "alternates").write_text(f"{snapshot}\n")
        seen = await self._worker_git(checkout, "cat-file", "-e", f"{sha}^{{commit}}", check=False)
        if seen.returncode != 0:
            await self._remove(checkout)
            self._fall_back(f"{sha[:12]} is not visible through the alternates to {snapshot}")
            return False
        await self._worker_git(checkout, "update-ref", checkout.ref, sha, "")
        await self._worker_git(checkout, "reset", "--hard", "--quiet", checkout.ref)
        return True

    def _fall_back(self, why: str) -> None:
        if self.strategy == "snapshot":
            self.strategy = "clone"
            self.fallback_reason = f"{why}; every new workspace is a private clone instead"

    async def _init(self, checkout: Checkout) -> None:
        """An empty git dir outside the work tree, HEAD on the worker's (unborn) branch, no hooks."""
        checkout.work_tree.mkdir(parents=True)
        checkout.git_dir.parent.mkdir(parents=True, exist_ok=True)
        await self.git.run(
            f"--git-dir={checkout.git_dir}",
            f"--work-tree={checkout.work_tree}",
            "init",
            "--quiet",
            "--template=",
            f"--initial-branch={checkout.branch}",
        )
        (checkout.git_dir / "info").mkdir(exist_ok=True)
        (checkout.git_dir / "info" / "exclude").write_text(f"/{HARNESS_DIR}\n")  # a folder, a file or a link

    async def nested_repositories(self, checkout: Checkout) -> tuple[str, ...]:
        """The folders of the work tree that git takes for repositories of their own (a `.git` folder,
        or a `.git` file naming a git dir elsewhere), outside ignored paths: `git add` would record
        each as a gitlink. Git's own answer (`ls-files --others` lists such a folder as `path/`), so
        that what is left out of a commit is exactly what would have gone in as a gitlink."""
        listing = await self._worker_git(checkout, "ls-files", "--others", "--exclude-standard", "-z")
        return tuple(sorted(p[:-1] for p in listing.stdout.split("\0") if p.endswith("/")))

    async def commit(self, checkout: Checkout, message: str) -> str | None:
        """Commit all changes in the work tree (incl. deletions, not `.hilbert`); None if there are none.
        A nested repository (`nested_repositories`) is left out, never recorded as a gitlink: its
        files stay in the work tree (and in the archive at cleanup), and the stop gate names it
        (`hilbert.judge.integrity.left_out_findings`). A gitlink that got in anyway (a repository made
        while `add` ran) is taken out of the index again before the commit."""
        await self._stage(checkout)
        staged = await self._worker_git(checkout, "diff", "--cached", "--quiet", check=False)
        if staged.returncode == 0:
            return None
        if staged.returncode != 1:
            raise RunError(f"git diff --cached failed in {checkout.git_dir}: {staged.stderr.strip()}")
        await self._worker_git(
            checkout, "commit", "--quiet", "--no-verify", "--allow-empty-message", "-m", message
        )
        head = await self._worker_git(checkout, "rev-parse", "--verify", checkout.ref)
        return head.stdout.strip()

    async def snapshot(self, checkout: Checkout, ref: str, message: str) -> str:
        """Commit the work tree as it is now (what `commit` would take) to `ref` of the worker's
        repository, on top of its branch, through an index of its own: the worker's index and branch
        are not touched. The commit's sha."""
        index = {"GIT_INDEX_FILE": str(checkout.git_dir / "hilbert-snapshot-index")}
        await self._worker_git(checkout, "read-tree", checkout.ref, env=index)
        await self._stage(checkout, index)
        tree = (await self._worker_git(checkout, "write-tree", env=index)).stdout.strip()
        made = await self._worker_git(checkout, "commit-tree", tree, "-p", checkout.ref, "-m", message)
        commit = made.stdout.strip()
        await self._worker_git(checkout, "update-ref", ref, commit)
        (checkout.git_dir / "hilbert-snapshot-index").unlink(missing_ok=True)
        return commit

    async def _stage(self, checkout: Checkout, env: Mapping[str, str] = {}) -> None:
        """`git add --all` in the index (`env`'s `GIT_INDEX_FILE`, else the worker's), leaving nested
        repositories out and taking a gitlink that got in anyway out again (see `commit`)."""
        nested = await self.nested_repositories(checkout)
        pathspecs = ["."] + [f":(exclude,literal){path}" for path in nested]
        await self.git.run(  # `/.hilbert` is in the git dir's info/exclude
            f"--git-dir={checkout.git_dir}", f"--work-tree={checkout.work_tree}",
            "add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul",
            cwd=checkout.work_tree, stdin="\0".join(pathspecs).encode(), extra_env=env,
        )  # fmt: skip
        await self._unstage_gitlinks(checkout, env)

    async def _unstage_gitlinks(self, checkout: Checkout, env: Mapping[str, str] = {}) -> None:
        """Take every gitlink (mode 160000) the index has and the branch has not out of the index."""
        staged = await self._worker_git(
            checkout, "diff-index", "--cached", "--raw", "-z", "--no-renames", checkout.ref, env=env
        )  # index against a commit: no work tree is read, no nested repository looked into
        fields = staged.stdout.split("\0")
        gitlinks = [
            fields[i + 1] for i in range(0, len(fields) - 1, 2) if fields[i].split(" ")[1:2] == ["160000"]
        ]
        if gitlinks:
            await self.git.run(
                f"--git-dir={checkout.git_dir}", f"--work-tree={checkout.work_tree}",
                "update-index", "--force-remove", "-z", "--stdin",
                cwd=checkout.work_tree, extra_env=env,
                stdin="".join(f"{path}\0" for path in gitlinks).encode(),
            )  # fmt: skip

    async def tip(self, checkout: Checkout) -> str:
        """The sha the worker's branch points at."""
        return (await self._worker_git(checkout, "rev-parse", "--verify", checkout.ref)).stdout.strip()

    async def export(self, checkout: Checkout, commit: str, dest: Path) -> Path:
        """A clean copy of `commit`'s tree (no git dir, nothing the worker left uncommitted) in `dest`,
        for checks that must not run in the worker's own workspace: written from the raw blobs, so no
        attribute, filter or replace ref the worker committed or left changes it
        (`hilbert.workspaces.export`)."""
        return await export_commit(self.git, checkout.git_dir, commit, dest)

    async def fetch_into(self, checkout: Checkout, integration: Integration, ref: str) -> str:
        """Copy the worker's branch into the integration repository as `ref`; its sha."""
        await integration.receive(checkout.git_dir, checkout.ref, ref)
        tip = await self._worker_git(checkout, "rev-parse", "--verify", checkout.ref)
        return tip.stdout.strip()

    async def archive_or_remove(
        self,
        checkout: Checkout,
        integration: Integration,
        integration_ref: str | None = None,
        *,
        closing: Callable[[str], None] = lambda kept: None,
    ) -> str:
        """Remove the checkout if it holds nothing new, else archive it first; says what was kept. A
        checkout whose repository git cannot read (damaged, removed) cannot be judged: its work tree is
        archived whole and nothing is removed. `closing(kept)` hears the outcome once the archive is
        written and before anything is removed, so that a log written there never misses a workspace
        that is gone (a kill while removing leaves a closed workspace half there, never one gone
        unrecorded)."""
        try:
            return await self._archive_or_remove(
                checkout, integration, integration_ref or integration.ref, closing
            )
        except RunError as unreadable:
            archive = self.root / "archive"
            archive.mkdir(parents=True, exist_ok=True)
            tarball = self._archive_stem(checkout).with_suffix(".tar.gz")
            await asyncio.to_thread(_tar, checkout.work_tree, tarball, checkout.worker_id)
            kept = (
                f"{checkout.worker_id}: archived the work tree to {tarball} and removed nothing: "
                f"its repository cannot be read ({unreadable})"
            )
            closing(kept)
            return kept

    async def _archive_or_remove(
        self,
        checkout: Checkout,
        integration: Integration,
        integration_ref: str,
        closing: Callable[[str], None],
    ) -> str:
        tip = (await self._worker_git(checkout, "rev-parse", "--verify", checkout.ref)).stdout.strip()
        status = await self._worker_git(
            checkout, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all"
        )  # a nested repository is one untracked `path/`: counted, never looked into
        dirty = [line for line in status.stdout.splitlines() if line.strip()]
        unmerged = 0
        if tip != checkout.base:
            count = await self._worker_git(
                checkout, "rev-list", "--count", f"{checkout.base}..{checkout.ref}"
            )
            if not await integration.contains(tip, integration_ref):  # not there, or not an ancestor
                unmerged = int(count.stdout.strip() or "0")
        name = checkout.worker_id
        if not dirty and not unmerged:
            kept = f"{name}: removed workspace (no uncommitted changes, branch merged into {integration_ref})"
        else:
            archived = await self._archive(checkout, unmerged)
            why = []
            if unmerged:
                why.append(f"{unmerged} commit(s) not in {integration_ref}")
            if dirty:
                why.append(f"{len(dirty)} uncommitted change(s)")
            where = ", ".join(str(p) for p in archived)
            kept = f"{name}: archived {' and '.join(why)} to {where}; removed workspace"
        closing(kept)
        await self._remove(checkout)
        return kept

    async def _archive(self, checkout: Checkout, unmerged: int) -> list[Path]:
        (self.root / "archive").mkdir(parents=True, exist_ok=True)
        stem = self._archive_stem(checkout)
        kept: list[Path] = []
        if unmerged:
            bundle = stem.with_suffix(".bundle")
            await self._worker_git(
                checkout, "bundle", "create", "--quiet", bundle, checkout.ref, f"^{checkout.base}"
            )
            await self._worker_git(checkout, "bundle", "verify", "--quiet", bundle)
            kept.append(bundle)
        tarball = stem.with_suffix(".tar.gz")
        await asyncio.to_thread(_tar, checkout.work_tree, tarball, checkout.worker_id)
        kept.append(tarball)
        return kept

    def _archive_stem(self, checkout: Checkout) -> Path:
        when = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}"
        return self.root / "archive" / f"{checkout.worker_id}-{when}"

    async def _remove(self, checkout: Checkout) -> None:
        for path in (checkout.work_tree, checkout.git_dir):
            await asyncio.to_thread(shutil.rmtree, path)


def _tar(work_tree: Path, tarball: Path, arcname: str) -> None:
    """The whole work tree (tracked, untracked and ignored files) as `<arcname>/...`."""
    partial = tarball.with_name(tarball.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(work_tree, arcname=arcname)
    partial.rename(tarball)
