"""Where the agent's file tools open files: beneath a folder (the workspace), never out of it.

The tools run in the harness's process, outside the sandbox, on a workspace that a process the worker
left running may still be changing. So a path is never checked by name and opened by name later (a
symlink swapped in between would lead the open anywhere: the message key, the run's hidden folder).
`Folder.relative(path)` only spells the model's path relative to the root, lexically (an absolute
path elsewhere is refused); every open then starts from a descriptor of the root and goes through
`hilbert.security.safe_open` (openat2 with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, or its
`O_NOFOLLOW` walk), which refuses during the open itself any step that leaves the root. Symlinks that
stay inside work as usual: a link `a -> sub/b.txt` reads and edits `sub/b.txt`.

The root's descriptor is opened once per tool call (`Folder.root()`), by the path the harness chose
(its parent is not the worker's to change), so a workspace rebuilt meanwhile is never used through a
stale descriptor. A refusal is a `ToolRefused`, whose message the loop returns to the model as a
tool error; other failures (a missing file) stay `OSError`s, which the toolbox reports the same way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from hilbert.security.safe_open import make_dirs_beneath, open_beneath

READ = os.O_RDONLY | os.O_NONBLOCK  # a fifo planted where a file was expected must not hang the harness


class ToolRefused(Exception):
    """A tool call that cannot run as asked; the message goes back to the model as a tool error."""


class Folder:
    """Opens files beneath `root` (resolved once, here); `use_openat2=False` takes the walk instead of
    the kernel's openat2 (the tests run both)."""

    def __init__(self, root: Path, *, use_openat2: bool = True) -> None:
        self.root_path = root.resolve()
        self.use_openat2 = use_openat2

    def relative(self, path: str) -> str:
        """`path` (relative to the root, or absolute inside it) spelled relative to the root, `/`
        separated, without `.` parts (`.` for the root itself). `..` stays: the open resolves it."""
        if not path or "\x00" in path:
            raise ToolRefused("empty or invalid path")
        pure = PurePosixPath(path)
        if pure.is_absolute():
            if not pure.is_relative_to(self.root_path):
                raise ToolRefused(outside(path))
            pure = pure.relative_to(self.root_path)
        return "/".join(part for part in pure.parts if part != ".") or "."

    @contextlib.contextmanager
    def root(self) -> Iterator[int]:
        """A descriptor of the root, for the opens of one tool call."""
        fd = os.open(self.root_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            yield fd
        finally:
            os.close(fd)

    def open(self, root_fd: int, relative: str, flags: int, said: str, mode: int = 0o666) -> int:
        """`relative` opened beneath `root_fd`; a path that leads out is a `ToolRefused` naming `said`."""
        try:
            return open_beneath(root_fd, relative, flags, mode, use_openat2=self.use_openat2)
        except OSError as failed:
            raise refusal(failed, said) from None

    def open_file(self, root_fd: int, relative: str, flags: int, said: str, mode: int = 0o666) -> int:
        """As `open`, for a regular file: a folder or anything else is refused."""
        fd = self.open(root_fd, relative, flags, said, mode)
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            os.close(fd)
            what = "is a directory; use list_files" if stat.S_ISDIR(kind) else "is not a regular file"
            raise ToolRefused(f"{said} {what}")
        return fd

    def make_parents(self, root_fd: int, relative: str, said: str) -> None:
        """Make the folders above `relative` that are missing, beneath the root."""
        parent = str(PurePosixPath(relative).parent)
        if parent == ".":
            return
        try:
            os.close(make_dirs_beneath(root_fd, parent, use_openat2=self.use_openat2))
        except OSError as failed:
            raise refusal(failed, said) from None


def outside(said: str) -> str:
    return (
        f"refused: {said!r} leads outside the workspace (through '..', an absolute path or a symlink); "
        "use paths relative to the workspace root"
    )


def refusal(failed: OSError, said: str) -> Exception:
    """What a failed open means to the model: leading out and symlink loops are refusals."""
    if failed.errno == errno.EXDEV:
        return ToolRefused(outside(said))
    if failed.errno == errno.ELOOP:
        return ToolRefused(f"refused: {said!r} cannot be resolved (a symlink loop, or too many symlinks)")
    return failed
