"""The originals of protected files (tests, their configuration, CI) that a worker changed, copied into its
workspace so that it can put them back: its commands have no git of their own.

The harness writes them *into a worker's workspace*, outside any sandbox, so nothing the worker made may
steer the write: the copies go into a new folder `.hilbert/base-<random>/`, created and filled through
directory descriptors opened without following symlinks (`O_NOFOLLOW`), files created exclusively. A
`.hilbert` that is not a real folder (a symlink the worker planted) means no copies, and no hint.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from hilbert.workspaces.git import Git
from hilbert.workspaces.workspaces import HARNESS_DIR

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


async def original(git: Git, git_dir: Path, commit: str, path: str) -> bytes | None:
    """The bytes of `path` at `commit` in `git_dir`, or None when it did not exist there."""
    found = await git.run("--git-dir", git_dir, "cat-file", "blob", f"{commit}:{path}", check=False)
    return found.raw if found.returncode == 0 else None


def copy_in(work_tree: Path, files: Mapping[str, bytes]) -> str | None:
    """Write `files` (repository paths -> bytes) under a new `.hilbert/base-<random>/` in `work_tree`;
    the folder's path relative to the work tree, or None when it could not be written safely."""
    folder = f"base-{secrets.token_hex(4)}"
    try:
        tree = os.open(work_tree, _DIR)
    except OSError:
        return None
    opened = [tree]
    try:
        with _suppress_exists():
            os.mkdir(HARNESS_DIR, 0o755, dir_fd=tree)
        harness = os.open(HARNESS_DIR, _DIR, dir_fd=tree)  # fails on a symlink: no copies
        opened.append(harness)
        os.mkdir(folder, 0o755, dir_fd=harness)  # new: nothing inside was planted
        base = os.open(folder, _DIR, dir_fd=harness)
        opened.append(base)
        for path, data in files.items():
            *parents, name = PurePosixPath(path).parts
            if ".." in parents or name in ("", "..") or PurePosixPath(path).is_absolute():
                return None
            parent = base
            for part in parents:
                with _suppress_exists():
                    os.mkdir(part, 0o755, dir_fd=parent)
                parent = os.open(part, _DIR, dir_fd=parent)
                opened.append(parent)
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
            with os.fdopen(out, "wb") as handle:
                handle.write(data)
    except OSError:
        return None
    finally:
        for descriptor in opened:
            os.close(descriptor)
    return f"{HARNESS_DIR}/{folder}"


class _suppress_exists:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is FileExistsError
