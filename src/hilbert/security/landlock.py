"""Landlock, the kernel's unprivileged sandbox: a small ctypes binding and a launcher that runs one
command inside it. Standard library only, so the launcher starts fast as a script:

    python -I -S landlock.py --write DIR ... [--read DIR ...] [--hide DIR ...] [--tmpdir DIR]
                             [--chdir DIR] [--network] -- ARGV...

It sets `PR_SET_NO_NEW_PRIVS`, restricts itself and `execvp`s ARGV, which then runs with:

- the whole file system readable and executable, except the `--hide` folders (and their contents);
- writes (write, make, remove, truncate, refer — every such right the kernel's ABI knows) only beneath
  the `--write` folders, plus the character devices commands write to (`/dev/null`, `/dev/tty`, ...)
  and `/dev/shm` (POSIX semaphores: Python's multiprocessing needs it);
- no TCP connect or bind (ABI >= 4) unless `--network`; abstract unix sockets and signals scoped to
  the sandbox (ABI >= 6);
- `TMPDIR` set to `--tmpdir` (made if missing, with a `.gitignore` of `*`): there is no private /tmp.

Landlock rules only *allow*, and a right granted on a folder holds for everything beneath it, so
"everything but H" is granted as its complement: read on every sibling along the path from `/` down
to each hidden folder. Hence the limits: the folders *above* a hidden one (often `/` and the home
folder) cannot be listed, though everything in them can be reached by name; files created in them
after the sandbox started are unreadable; a `--write` or `--read` folder inside a hidden one shows
through (as the workspace does under bubblewrap). Rights the running kernel does not know are masked
out, as the kernel documentation's best-effort example does (ABI 1: no cross-folder rename or link).

`abi_version()` is 0 where Landlock is unavailable (not Linux, another architecture, disabled).
"""

from __future__ import annotations

import ctypes
import os
import sys

# Only the standard library, and of it only what starts fast: no `platform`, no `collections.abc`
# (annotations use `list`); this file runs as `python -I -S` before every sandboxed command.

SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}  # create_ruleset, add_rule, restrict_self
CREATE_RULESET_VERSION = 1
PR_SET_NO_NEW_PRIVS = 38
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO) | (
    MAKE_BLOCK | MAKE_SYM | REFER | TRUNCATE | IOCTL_DEV
)
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # all a rule on a non-folder may hold
DEVICES = (
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
)
DEVICE_RIGHTS = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV  # `> /dev/null` opens with O_TRUNC
SHARED_WRITABLE = ("/dev/shm",)  # POSIX semaphores and shared memory (Python's multiprocessing)
USAGE = "usage: landlock.py [--write|--read|--hide|--tmpdir|--chdir DIR]... [--network] -- ARGV..."
DENIED = 126  # the launcher's exit status when it cannot sandbox (the shell's "cannot execute")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),  # ABI 4
        ("scoped", ctypes.c_uint64),  # ABI 6; older kernels accept the zeros they do not know
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers (1, 2, ...); 0 where there is none."""
    numbers = SYSCALLS.get(os.uname().machine)
    if sys.platform != "linux" or numbers is None:
        return 0
    try:
        return _syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError:  # ENOSYS: not built in; EOPNOTSUPP: disabled at boot
        return 0


def handled_fs(abi: int) -> int:
    """The file-system rights this ABI knows, all of them handled (denied unless a rule allows)."""
    rights = READ | WRITE
    if abi < 2:
        rights &= ~REFER
    if abi < 3:
        rights &= ~TRUNCATE
    if abi < 5:
        rights &= ~IOCTL_DEV
    return rights


def complement(hidden: list[str]) -> list[str]:
    """The paths whose subtrees together hold the whole file system but the `hidden` folders: `/`
    when nothing is hidden, else every entry along the way to a hidden folder that leads elsewhere."""
    walls = {os.path.realpath(h) for h in hidden if os.path.isdir(h)}
    if "/" in walls:
        return []
    granted: list[str] = []

    def cover(folder: str) -> None:
        if folder in walls:
            return
        prefix = folder.rstrip("/") + "/"
        if not any(wall.startswith(prefix) for wall in walls):
            granted.append(folder)
            return
        try:
            names = sorted(os.listdir(folder))
        except OSError:  # unreadable to this user anyway
            return
        for name in names:
            path = prefix + name
            if not os.path.islink(path):  # a link's target is covered (or hidden) where it lives
                cover(path)

    cover("/")
    return granted


def restrict(abi: int, *, write: list[str], read: list[str], hidden: list[str], network: bool) -> None:
    """Confine this process (and what it execs) as the module docstring says; `OSError` if it cannot."""
    create, add_rule, restrict_self = SYSCALLS[os.uname().machine]
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0, 0)
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _syscall(create, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    try:
        rules = [(path, READ) for path in [*complement(hidden), *read]]
        rules += [(path, fs) for path in write]
        rules += [(path, DEVICE_RIGHTS) for path in DEVICES]
        rules += [(path, READ | WRITE & ~IOCTL_DEV) for path in SHARED_WRITABLE]
        for path, rights in rules:
            if rights & fs:
                _allow(ruleset, add_rule, path, rights & fs)
        if _syscall_prctl(PR_SET_NO_NEW_PRIVS) != 0:
            raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, add_rule: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # gone, or not ours to open: nothing to grant
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def _syscall_prctl(option: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(ctypes.c_int(option), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), 0))


def main(args: list[str]) -> int:
    """The launcher: parse `args`, confine, exec. Returns only on failure (exit status `DENIED`)."""
    if "--" not in args or args.index("--") == len(args) - 1:
        print(USAGE, file=sys.stderr)
        return 2
    options, argv = list(args[: args.index("--")]), list(args[args.index("--") + 1 :])
    found: dict[str, list[str]] = {"--write": [], "--read": [], "--hide": [], "--tmpdir": [], "--chdir": []}
    network = "--network" in options
    options = [o for o in options if o != "--network"]
    if len(options) % 2 or any(flag not in found for flag in options[::2]):
        print(USAGE, file=sys.stderr)
        return 2
    for flag, value in zip(options[::2], options[1::2], strict=True):
        found[flag].append(value)
    abi = abi_version()
    if abi == 0:
        print("hilbert-landlock: this kernel has no Landlock; nothing was run", file=sys.stderr)
        return DENIED
    try:
        for tmp in found["--tmpdir"]:
            os.makedirs(tmp, exist_ok=True)
            ignore = os.path.join(tmp, ".gitignore")
            if not os.path.exists(ignore):
                with open(ignore, "w") as file:
                    file.write("*\n")
            os.environ["TMPDIR"] = tmp
        for folder in found["--chdir"]:
            os.chdir(folder)
        restrict(abi, write=found["--write"], read=found["--read"], hidden=found["--hide"], network=network)
    except OSError as error:
        print(f"hilbert-landlock: cannot sandbox ({error}); nothing was run", file=sys.stderr)
        return DENIED
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        print(f"hilbert-landlock: {argv[0]}: {error.strerror}", file=sys.stderr)
        return 127
    return DENIED  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
