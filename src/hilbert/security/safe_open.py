"""Opening a file beneath a folder without being led out of it by anything planted there.

The harness's file tools (`hilbert.agent.tools`) run outside the sandbox, on a workspace that a
process a worker started may still be changing. Checking a path by name ("its realpath is inside")
and opening it by name afterwards is a race: a symlink swapped between the two leads the open
anywhere — the message key, the run's hidden folder. So nothing here checks a name: every open starts
from a descriptor of the root folder, and the kernel (or our own walk) refuses, during the open
itself, any step that leaves it.

- `openat2(dirfd, path, flags, mode, resolve)`: Linux's openat2 (5.6+), called through ctypes
  (`syscall(437, ...)`, the same number on x86_64 and aarch64; Python 3.11 has no `os.openat2`).
- `open_beneath(root_fd, path, flags)` calls it with `BENEATH` = `RESOLVE_BENEATH |
  RESOLVE_NO_MAGICLINKS`: `..` above the root, an absolute path, or a symlink (absolute, or relative
  and climbing out) fails with EXDEV; /proc's magic links with ELOOP; symlinks that stay inside are
  followed as usual. Where the kernel has no openat2 (ENOSYS, or a seccomp filter answering EPERM:
  `openat2_works`), or when the caller asks (`use_openat2=False`, which the tests use), it walks the
  path itself instead: one component at a time, each opened with `O_NOFOLLOW` relative to the
  folder the walk holds open; a symlink met on the way is read (`readlink` relative to that folder)
  and its target walked by the same rules — an absolute target, or `..` above the root, fails with
  EXDEV — at most `MAX_HOPS` of them (ELOOP past that). `..` pops a folder the walk holds, never asks
  the kernel, so a folder renamed meanwhile cannot take the walk out.
- `make_dirs_beneath(root_fd, path)`: `mkdir -p` beneath the root, one folder at a time (mkdirat,
  which never follows; then the folder opened beneath the root as above).

Failures are `OSError`s with the kernel's errno: EXDEV means "leads outside the root". What a
refusal means to a model is said elsewhere (`hilbert.agent.paths`). Linux only; elsewhere the walk.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import sys
from typing import Any

SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
BENEATH = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
AT_FDCWD = -100
MAX_HOPS = 40  # symlinks followed in one walk, as the kernel's own limit
EAGAIN_TRIES = 8  # openat2 answers EAGAIN when a rename raced its `..` check; then the walk is used


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _syscall() -> Any:
    call = ctypes.CDLL(None, use_errno=True).syscall
    call.restype = ctypes.c_long
    return call


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """A new descriptor (close-on-exec) for `path` opened relative to `dirfd` with openat2(2), or
    OSError with its errno (ENOSYS where the kernel or platform has none)."""
    if sys.platform != "linux":
        raise OSError(errno.ENOSYS, "openat2 is Linux's", path)
    tmpfile = getattr(os, "O_TMPFILE", 0)
    creates = flags & os.O_CREAT or (tmpfile and flags & tmpfile == tmpfile)
    how = _OpenHow(flags | os.O_CLOEXEC, mode if creates else 0, resolve)  # mode must be 0 otherwise
    fd = _syscall()(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


@functools.cache
def openat2_works() -> bool:
    """Whether openat2 runs here (Linux 5.6+, not refused by a seccomp filter)."""
    try:
        os.close(openat2(AT_FDCWD, "/", os.O_RDONLY | os.O_DIRECTORY))
    except OSError as failed:
        return failed.errno not in (errno.ENOSYS, errno.EPERM)
    return True


def open_beneath(root_fd: int, path: str, flags: int, mode: int = 0o666, *, use_openat2: bool = True) -> int:
    """`path` (relative) opened beneath the folder `root_fd` with `flags`; EXDEV if it leads outside."""
    if use_openat2 and openat2_works():
        for _ in range(EAGAIN_TRIES):
            try:
                return openat2(root_fd, path or ".", flags, mode, BENEATH)
            except OSError as failed:
                if failed.errno != errno.EAGAIN:
                    raise
    return _walk(root_fd, path, flags, mode)


def make_dirs_beneath(root_fd: int, path: str, mode: int = 0o777, *, use_openat2: bool = True) -> int:
    """Make the folders of `path` beneath `root_fd` that are missing, following only links that stay
    inside; a descriptor of the last one."""
    parts = _parts(path)
    if path.startswith("/"):
        raise _outside(path)
    folder = os.dup(root_fd)
    try:
        for count, name in enumerate(parts, 1):
            with contextlib.suppress(FileExistsError):  # a folder, or a link: followed below, beneath
                os.mkdir(name, mode, dir_fd=folder)
            reached = "/".join(parts[:count])
            following = open_beneath(root_fd, reached, os.O_RDONLY | os.O_DIRECTORY, use_openat2=use_openat2)
            os.close(folder)
            folder = following
    except BaseException:
        os.close(folder)
        raise
    return folder


def _walk(root_fd: int, path: str, flags: int, mode: int) -> int:
    """`open_beneath` without openat2: see the module docstring."""
    if path.startswith("/"):
        raise _outside(path)
    todo = _parts(path)[::-1]  # a stack: the next component last
    held = [root_fd]  # the folders from the root down to where the walk is; the root is not ours
    hops = 0
    try:
        while todo:
            name = todo.pop()
            if name == "..":
                if len(held) == 1:
                    raise _outside(path)
                os.close(held.pop())
                continue
            last = not todo
            try:
                if last:
                    return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=held[-1])
                held.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=held[-1]))
                continue
            except OSError as failed:
                if failed.errno not in (errno.ELOOP, errno.ENOTDIR) or (last and flags & os.O_NOFOLLOW):
                    raise
                target = _link(name, held[-1], failed)
            hops += 1
            if hops > MAX_HOPS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):
                raise _outside(path)
            todo.extend(_parts(target)[::-1])
        return os.open(".", flags, mode, dir_fd=held[-1])  # the path named a folder
    finally:
        for fd in held[1:]:
            os.close(fd)


def _link(name: str, folder: int, failed: OSError) -> str:
    """The target of the symlink `name` in `folder`; `failed` again when it is not a symlink."""
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError:
        raise failed from None


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _outside(path: str) -> OSError:
    return OSError(errno.EXDEV, "leads outside the folder it must stay beneath", path)
