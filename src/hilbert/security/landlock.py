"""Landlock, the kernel's unprivileged sandbox: a small ctypes binding and a launcher that runs one
command inside it. Standard library only, so the launcher starts fast as a script:

    python -I -S landlock.py --write DIR ... [--read DIR ...] [--hide PATH ...] [--tmpdir DIR]
                             [--chdir DIR] [--network] -- ARGV...

It sets `PR_SET_NO_NEW_PRIVS`, restricts itself, installs a seccomp filter and `execvp`s ARGV, which
then runs with:

- the whole file system readable and executable, except the `--hide` folders (and their contents)
  and files, and `/dev/shm` (`UNSHARED`), neither readable nor writable: the machine's one folder of
  POSIX shared memory and semaphores, shared with every worker and the person (bubblewrap gives each
  command its own, Landlock cannot), so a command could read or plant another's there. The price:
  `sem_open` fails, and with it multiprocessing's locks, queues and pools (`PermissionError`);
- writes (write, make, remove, truncate, refer — every such right the kernel's ABI knows) only beneath
  the `--write` folders, plus the character devices commands write to (`/dev/null`, `/dev/tty`, ...);
- no TCP connect or bind (ABI >= 4) unless `--network`; abstract unix sockets and signals scoped to
  the sandbox (ABI >= 6);
- a seccomp filter for what Landlock cannot refuse (`seccomp_filter`): no unix socket but an unnamed
  pair (`connect()` to a named one — docker.sock, the session bus, an ssh or gpg agent — is not a
  file access Landlock controls, even inside a hidden folder), no io_uring (it opens sockets past
  seccomp), only TCP in `AF_INET`/`AF_INET6` unless `--network` (no UDP out), and no other family
  but netlink. Python's multiprocessing can still fork a `Process` and talk over a `Pipe`; the
  `forkserver` start method (Python 3.14's default) and `multiprocessing.Manager` need a named unix
  socket and fail with EPERM;
- `TMPDIR` set to `--tmpdir`, made *after* restricting (so only inside a `--write` folder) and used
  only when its real path is inside one, with a `.gitignore` of `*`: there is no private /tmp.

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
UNSHARED = ("/dev/shm",)  # the host's POSIX shared memory: hidden always (see the module docstring)
USAGE = "usage: landlock.py [--write|--read|--hide|--tmpdir|--chdir DIR]... [--network] -- ARGV..."

# seccomp: `struct seccomp_data` is {int nr; u32 arch; u64 ip; u64 args[6]}; ints are the low words.
ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_*: other ABIs (i386, x32) denied
SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}  # socket, socketpair
IO_URING_SETUP = 425  # the same number on both
X32_SYSCALL_BIT = 0x40000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
LD_W_ABS, JEQ, JGE, AND, RET = 0x20, 0x15, 0x35, 0x54, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, ...
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, SOCK_DGRAM, SOCK_TYPE_MASK, IPPROTO_TCP = 1, 2, 0xF, 6
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
    """The paths whose subtrees together hold the whole file system but the `hidden` folders and
    files: `/` when nothing is hidden, else every entry along the way to a hidden one that leads
    elsewhere."""
    walls = {os.path.realpath(h) for h in hidden if os.path.exists(h)}
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


Op = tuple[int | str, int | str, int | str, int]  # (code or a label, jt, jf, k): jumps to labels or by 0


def seccomp_filter(machine: str, *, network: bool) -> list[tuple[int, int, int, int]]:
    """The BPF program (code, jt, jf, k) the launcher installs: see the module docstring."""
    socket, socketpair = SOCKET_CALLS[machine]
    arg = [16 + 8 * i for i in range(3)]  # the low 32 bits of args[0..2] (little-endian)
    x32: list[Op] = [(JGE, "deny", 0, X32_SYSCALL_BIT)] if machine == "x86_64" else []
    inet_types: list[Op] = [  # TCP only: a stream socket of protocol 0 or IPPROTO_TCP (not SCTP, MPTCP)
        (LD_W_ABS, 0, 0, arg[1]),
        (AND, 0, 0, SOCK_TYPE_MASK),
        (JEQ, 0, "deny", SOCK_STREAM),
        (LD_W_ABS, 0, 0, arg[2]),
        (JEQ, "allow", 0, 0),
        (JEQ, "allow", "deny", IPPROTO_TCP),
    ]
    if network:
        inet_types = [(RET, 0, 0, RET_ALLOW)]
    program: list[Op] = [
        (LD_W_ABS, 0, 0, 4),
        (JEQ, 0, "deny", ARCHES[machine]),
        (LD_W_ABS, 0, 0, 0),
        *x32,
        (JEQ, "deny", 0, IO_URING_SETUP),
        (JEQ, "socket", 0, socket),
        (JEQ, "socketpair", 0, socketpair),
        (RET, 0, 0, RET_ALLOW),
        ("socket", 0, 0, 0),
        (LD_W_ABS, 0, 0, arg[0]),
        (JEQ, "inet", 0, AF_INET),
        (JEQ, "inet", 0, AF_INET6),
        (JEQ, "allow", "deny", AF_NETLINK),
        ("inet", 0, 0, 0),
        *inet_types,
        ("socketpair", 0, 0, 0),  # unnamed and connected to each other; a datagram one can send anywhere
        (LD_W_ABS, 0, 0, arg[1]),
        (AND, 0, 0, SOCK_TYPE_MASK),
        (JEQ, "deny", "allow", SOCK_DGRAM),
        ("allow", 0, 0, 0),
        (RET, 0, 0, RET_ALLOW),
        ("deny", 0, 0, 0),
        (RET, 0, 0, RET_EPERM),
    ]
    labels: dict[str, int] = {}
    code: list[Op] = []
    for op in program:
        if isinstance(op[0], str):
            labels[op[0]] = len(code)
        else:
            code.append(op)

    def offset(target: int | str, at: int) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else int(target)

    return [(int(op), offset(jt, i), offset(jf, i), k) for i, (op, jt, jf, k) in enumerate(code)]


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def install_seccomp(*, network: bool) -> None:
    """Load `seccomp_filter` into this process (needs `PR_SET_NO_NEW_PRIVS`); `OSError` if it cannot."""
    program = seccomp_filter(os.uname().machine, network=network)
    filters = (_SockFilter * len(program))(*(_SockFilter(*op) for op in program))
    fprog = _SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(_SockFilter)))
    libc = ctypes.CDLL(None, use_errno=True)
    done = libc.prctl(
        ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), 0, 0
    )
    if done != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp: {os.strerror(error)}")


def restrict(abi: int, *, write: list[str], read: list[str], hidden: list[str], network: bool) -> None:
    """Confine this process (and what it execs) as the module docstring says; `OSError` if it cannot."""
    create, add_rule, restrict_self = SYSCALLS[os.uname().machine]
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not network else 0, 0)
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    ruleset = _syscall(create, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    try:
        rules = [(path, READ) for path in [*complement([*hidden, *UNSHARED]), *read]]
        rules += [(path, fs) for path in write]
        rules += [(path, DEVICE_RIGHTS) for path in DEVICES]
        for path, rights in rules:
            if rights & fs:
                _allow(ruleset, add_rule, path, rights & fs)
        if _syscall_prctl(PR_SET_NO_NEW_PRIVS) != 0:
            raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(restrict_self, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    install_seccomp(network=network)


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


def make_tmpdir(tmp: str, write: list[str]) -> bool:
    """Make `tmp` (and its `.gitignore` of `*`) if missing; False unless its real path lies inside one
    of the `write` folders. Run it confined: then whatever a symlink on the way points to, no write
    lands outside them."""
    try:
        os.makedirs(tmp, exist_ok=True)
    except OSError:
        return False
    real = os.path.realpath(tmp)
    if not any(real.startswith(os.path.realpath(folder).rstrip("/") + "/") for folder in write):
        return False
    try:
        fd = os.open(
            os.path.join(real, ".gitignore"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644
        )
    except FileExistsError:
        return True
    except OSError:
        return False
    with os.fdopen(fd, "w") as file:
        file.write("*\n")
    return True


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
        for folder in found["--chdir"]:
            os.chdir(folder)
        restrict(abi, write=found["--write"], read=found["--read"], hidden=found["--hide"], network=network)
    except OSError as error:
        print(f"hilbert-landlock: cannot sandbox ({error}); nothing was run", file=sys.stderr)
        return DENIED
    for tmp in found[
        "--tmpdir"
    ]:  # after restricting: a planted symlink can lead nowhere but a --write folder
        if make_tmpdir(tmp, found["--write"]):
            os.environ["TMPDIR"] = tmp
        else:
            os.environ.pop("TMPDIR", None)
            print(
                f"hilbert-landlock: TMPDIR not set: {tmp} is not a folder inside the workspace",
                file=sys.stderr,
            )
    try:
        os.execvp(argv[0], argv)
    except OSError as error:
        print(f"hilbert-landlock: {argv[0]}: {error.strerror}", file=sys.stderr)
        return 127
    return DENIED  # not reached: execvp replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
