"""A disposable checkout of a person's repository: where the lead explores and runs commands while it
plans, so that nothing it runs writes into the repository itself.

`disposable_checkout(repo, where, git)` resolves the commit a run would start from (`HEAD`), clones the
repository into the new folder `where` sharing its objects read-only (`--shared`: the clone's own
objects go into the clone; nothing is hard-linked, so a write in the clone never reaches a file of the
person's repository), checks the commit out detached, forgets where it came from (no `origin`: nothing
to push to), and removes the folder on the way out, whatever happened inside. The person's repository
is only read.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from hilbert.errors import UserError
from hilbert.workspaces.git import Git


@dataclass(frozen=True)
class Disposable:
    """A checkout at `commit` in `path` (writable; gone after the `async with`)."""

    path: Path
    commit: str


@contextlib.asynccontextmanager
async def disposable_checkout(repo: Path, where: Path, git: Git) -> AsyncIterator[Disposable]:
    """A writable checkout of `repo`'s HEAD in the new folder `where`, removed afterwards."""
    found = await git.run("-C", repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if found.returncode != 0:
        raise UserError(f"{repo} has no commit yet", hint="commit your work first: the run starts from HEAD")
    commit = found.stdout.strip()
    if where.exists():
        raise UserError(f"{where} exists already", hint="remove it, or let hilbert pick a new folder")
    where.parent.mkdir(parents=True, exist_ok=True)
    try:
        await git.run("clone", "--quiet", "--shared", "--no-checkout", Path(repo).absolute(), where)
        await git.run("-C", where, "checkout", "--quiet", "--detach", commit)
        await git.run("-C", where, "remote", "remove", "origin")  # no way back to the person's repository
        yield Disposable(where, commit)
    finally:  # in a thread (a big tree would stall the loop), and finished even if we are cancelled
        await asyncio.shield(asyncio.to_thread(shutil.rmtree, where, ignore_errors=True))


__all__ = ["Disposable", "disposable_checkout"]
