"""A commit's tree written to a folder from its raw blobs, so that nothing the commit holds can steer
what the checks run on.

`git archive` (and a checkout) apply what the repository says about its files: `.gitattributes`
(`export-ignore` drops files, `export-subst` rewrites them, `filter`/`ident`/`eol`/`text`/
`working-tree-encoding` run drivers or rewrite bytes), the repository's config (filter drivers), and
replace refs (`refs/replace/` swaps one object for another). A worker commits `.gitattributes`, and
can leave config or replace refs in a repository the harness reads; any of them makes the exported
tree differ from the tree that was reviewed. `export_commit` reads the tree with
`git ls-tree -r -z --full-tree` and the blobs with `git cat-file --batch`, both plumbing that applies
no attribute, filter or conversion, with `GIT_NO_REPLACE_OBJECTS=1` and `--no-replace-objects`, and
writes the bytes itself:

- a file (100644) as it is, an executable (100755) with mode 0755, others 0644;
- a symbolic link (120000) as a link only when it resolves inside the tree, checked after every link
  is made (a link through another link is resolved for real, not by reading its text); any other is
  written as a regular file whose content is the link's target text, as git does with
  `core.symlinks=false`, so nothing outside the export is read through it;
- a gitlink (160000: a submodule) is skipped, as `git archive` does;
- a path git would refuse (absolute, `..`, a `.git` component in any case) is skipped.

Nothing here runs the commit's code; the file work runs in a thread, so a big tree does not stall the
event loop.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hilbert.errors import RunError
from hilbert.workspaces.git import Git

NO_REPLACE = {"GIT_NO_REPLACE_OBJECTS": "1"}


@dataclass(frozen=True)
class _Entry:
    mode: str
    oid: str
    path: str


async def export_commit(git: Git, repo: Path, commit: str, dest: Path) -> Path:
    """Write `commit`'s tree into the new folder `dest` (see the module docstring); returns `dest`.
    `repo` is a work tree or a git dir (a folder with `HEAD` and `objects/`, as the harness keeps
    per worker)."""
    where = _where(Path(repo))
    listing = await git.run(
        "--no-replace-objects", *where.args, "ls-tree", "-r", "-z", "--full-tree", commit,
        cwd=where.cwd, extra_env=NO_REPLACE,
    )  # fmt: skip
    entries = [entry for entry in _entries(listing.raw) if entry.mode != "160000" and _safe(entry.path)]
    blobs: dict[str, bytes] = {}
    wanted = sorted({entry.oid for entry in entries})
    if wanted:
        batch = await git.run(
            "--no-replace-objects", *where.args, "cat-file", "--batch",
            cwd=where.cwd, extra_env=NO_REPLACE, stdin="".join(f"{oid}\n" for oid in wanted).encode(),
        )  # fmt: skip
        blobs = _blobs(batch.raw)
    dest.mkdir(parents=True, exist_ok=False)
    await asyncio.to_thread(_write, entries, blobs, dest)
    return dest


@dataclass(frozen=True)
class _Where:
    args: tuple[str, ...]
    cwd: Path


def _where(repo: Path) -> _Where:
    if (repo / "HEAD").is_file() and (repo / "objects").is_dir():
        return _Where((f"--git-dir={repo}",), repo)
    return _Where((), repo)


def _entries(raw: bytes) -> list[_Entry]:
    found: list[_Entry] = []
    for record in raw.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, _kind, oid = meta.decode("ascii").split(" ")
        found.append(_Entry(mode, oid, os.fsdecode(path)))
    return found


def _safe(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return (
        bool(parts)
        and not path.startswith("/")
        and not any(part in ("", ".", "..") or part.lower() == ".git" for part in parts)
    )


def _blobs(raw: bytes) -> dict[str, bytes]:
    """`git cat-file --batch` output: `<oid> <type> <size>\\n<content>\\n` per object."""
    found: dict[str, bytes] = {}
    at = 0
    while at < len(raw):
        end = raw.index(b"\n", at)
        header = raw[at:end].decode("ascii").split(" ")
        if len(header) != 3:  # `<oid> missing`
            raise RunError(f"git cat-file: object {header[0]} is missing", hint="the repository is damaged")
        oid, _kind, size = header
        start = end + 1
        found[oid] = raw[start : start + int(size)]
        at = start + int(size) + 1
    return found


def _write(entries: list[_Entry], blobs: dict[str, bytes], dest: Path) -> None:
    links: list[tuple[Path, str]] = []
    for entry in entries:
        target = dest / entry.path
        if entry.mode == "120000":
            links.append((target, os.fsdecode(blobs[entry.oid])))
            continue
        if not _plain_parents(target, dest) or os.path.lexists(target):
            continue  # a malformed tree naming one path twice, or a file below a file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blobs[entry.oid])
        target.chmod(0o755 if entry.mode == "100755" else 0o644)
    root = dest.resolve()
    made: list[tuple[Path, str]] = []
    for link, text in links:
        if not _plain_parents(link, dest) or os.path.lexists(link):
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        if os.path.isabs(text):
            link.write_bytes(os.fsencode(text))
            continue
        os.symlink(text, link)
        made.append((link, text))
    changed = True
    while changed:  # a link that leads out, even through other links, becomes its text; until none does
        changed = False
        for link, text in made:
            if link.is_symlink() and not _inside(Path(os.path.realpath(link)), root):
                link.unlink()
                link.write_bytes(os.fsencode(text))
                changed = True


def _plain_parents(path: Path, dest: Path) -> bool:
    """No folder between `dest` and `path` is a link or a file (so a write cannot leave the export)."""
    current = path.parent
    while current != dest:
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            return False
        current = current.parent
    return True


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


__all__ = ["export_commit"]
