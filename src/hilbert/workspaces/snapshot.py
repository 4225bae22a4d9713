"""Per-base read-only object snapshots that worker repositories borrow through `objects/info/alternates`.

`root/objects/<base-sha>/` is a bare git *object directory* (it has `pack/` and `info/`, no refs, no
config) holding exactly the objects reachable from `<base-sha>`: one pack written by

    git -C <person's repo> pack-objects --revs <tmp>/pack/pack   (stdin: "<base-sha>\\n")

Why `pack-objects --revs` rather than `clone --bare --single-branch` of a temporary ref: it needs no ref
in the person's repository (we never write there), copies only the base's history (later commits and
other branches are simply not in the pack, so they are unreachable from every worker), reuses existing
deltas, and produces a single pack + index that alternates can point at directly. It is built into a
temporary folder and renamed into place, so a half-written snapshot is never visible, and two harness
processes racing on the same base both end up with one complete snapshot.

Snapshots are shared by every worker on that base and never written after creation (pack files are
0444); new objects of a worker land in the worker's own object directory. A build that failed is not
retried by this `Snapshots` object: callers waiting on the same base get a `RunError` at once (the
workspaces then fall back to private clones; see `hilbert.workspaces.workspaces`).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from pathlib import Path

from hilbert.errors import RunError, UserError
from hilbert.workspaces.git import Git

_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


async def resolve_base(git: Git, repo: Path, base: str) -> str:
    """The full commit sha that `base` (a sha, branch or tag) names in `repo`."""
    result = await git.run("-C", repo, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", check=False)
    sha = result.stdout.strip()
    if result.returncode != 0 or not _SHA.match(sha):
        raise UserError(
            f"{base!r} is not a commit in {repo}",
            hint="pass a branch, tag or commit sha that exists in the repository",
        )
    return sha


class Snapshots:
    """Builds (once per base sha) and finds the snapshot object directories under `objects_root`."""

    def __init__(self, git: Git, repo: Path, objects_root: Path) -> None:
        self._git = git
        self._repo = repo
        self._root = objects_root
        self._locks: dict[str, asyncio.Lock] = {}
        self._failed: dict[str, str] = {}

    def path(self, sha: str) -> Path:
        return self._root / sha

    async def ensure(self, sha: str) -> Path:
        """The object directory for `sha`, built on first use; concurrent callers share one build.
        Raises RunError (git failed) or OSError (the folder could not be written) if it cannot be built."""
        target = self.path(sha)
        lock = self._locks.setdefault(sha, asyncio.Lock())
        async with lock:
            if (target / "pack").is_dir():
                return target
            if sha in self._failed:
                raise RunError(
                    f"the object snapshot for {sha[:12]} could not be built: {self._failed[sha]}",
                    hint=f"check that {self._root} is a writable folder and the repository is sound",
                )
            try:
                await self._build(sha, target)
            except (RunError, OSError) as err:
                self._failed[sha] = str(err)
                raise
            return target

    async def _build(self, sha: str, target: Path) -> None:
        self._root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=self._root))
        try:
            (tmp / "pack").mkdir()
            (tmp / "info").mkdir()
            await self._git.run(
                "-C",
                self._repo,
                "pack-objects",
                "--revs",
                "--quiet",
                tmp / "pack" / "pack",
                stdin=f"{sha}\n".encode(),
            )
            if not any((tmp / "pack").glob("pack-*.idx")):
                raise RunError(f"git pack-objects wrote no pack for {sha}", hint="check the repository")
            os.chmod(tmp, 0o755)
            try:
                tmp.rename(target)
            except OSError:
                if not (target / "pack").is_dir():
                    raise
                # another process finished the same snapshot first; keep theirs
        finally:
            if tmp.exists():
                await asyncio.to_thread(shutil.rmtree, tmp, True)
