"""Where a worker's shell commands run: a sandbox in which only its workspace is writable, the person's
credentials and sockets are out of reach and the network is closed (bubblewrap: no network at all;
Landlock: no TCP, no UDP, no unix sockets but unnamed pairs) — or nowhere, when there is no sandbox
and the person has not accepted running without one.

`detect(...)` picks, in order, the first that really runs `bash -c true` (as commands run):

- **bubblewrap** (`bwrap`, installed by `make` where apt can): the whole file system read-only (the
  person's repository included), a private `/tmp`, `/dev` (its own `/dev/shm`), `/proc` and `/run`
  (and `XDG_RUNTIME_DIR`: no docker.sock, no session bus, no agent sockets there), what commands need
  from them (the interpreter's prefix, folders on PATH) bound back read-only, the `hidden` folders
  (the run's private folder with every other workspace, the git directories and the message key;
  hilbert's home) and the person's credentials (`CREDENTIALS` under the home: ~/.ssh, ~/.aws,
  ~/.netrc, ...) replaced by empty ones, the workspace bound back writable, every namespace unshared
  (no network unless asked for: not even UDP);
- **landlock** (the kernel's own sandbox, no binary needed; `hilbert.security.landlock` is the
  launcher): the same walls drawn as access rights — the file system readable but the `hidden`
  folders, the credentials, `/tmp` and `/run` (what commands need from them bound back), only the
  workspace writable, `TMPDIR` a folder inside it (`.hilbert/tmp`, git-ignored), no TCP (needs
  Landlock ABI 4, Linux 6.7, unless the network is allowed), and a seccomp filter for what Landlock
  cannot refuse: unix sockets (connecting to a named one is not a file access Landlock controls),
  UDP and other families; `/dev/shm` is neither readable nor writable (bubblewrap gives each command
  its own; Landlock can only take the shared one away). What it does not do that bubblewrap does is in
  `LANDLOCK_GAPS`;
- **unsandboxed**, only when the person accepted it (`--unsandboxed`): commands run as before, and every
  status line says so;
- else **refuse**: a worker's shell command is answered with a tool error saying why, and nothing runs.

Either way a named unix socket outside `/tmp`, `/run`, `XDG_RUNTIME_DIR`, the credentials and the
hidden folders stays connectable under bubblewrap (Landlock's filter refuses them all); commands get
no variable naming an agent's socket or a display (`hilbert.agent.tools.command_env`).

`Sandbox.wrap(argv, workspace, cwd)` is the one seam the shell tool uses. `detect`'s `which=`,
`landlock_abi=` and `home=` let tests take either sandbox away and point at a home of their own.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hilbert.security import landlock

Kind = Literal["bubblewrap", "landlock", "unsandboxed", "refuse"]
INSTALL_HINT = (
    "install bubblewrap (`make` does where apt can) or run on a kernel with Landlock (Linux 6.7 or later), "
    "or pass --unsandboxed to accept the risk"
)
REFUSED = (
    "refused: this machine has no sandbox for workers' shell commands (neither bubblewrap nor Landlock "
    "works here), and the person did not accept running them unsandboxed; the file tools still work"
)
LANDLOCK_TMP = Path(".hilbert") / "tmp"  # TMPDIR inside the workspace: Landlock has no private /tmp
LANDLOCK_NETWORK_ABI = 4  # the first ABI that can refuse TCP connect and bind
LANDLOCK_GAPS = (
    "unlike bubblewrap: no private /tmp (writes there fail; TMPDIR is the workspace's .hilbert/tmp), "
    "the machine's own /proc and /dev, no /dev/shm at all (multiprocessing's locks, queues and pools fail), "
    "no loopback TCP, no unix socket but unnamed pairs (multiprocessing's forkserver and Manager fail), "
    "the folders above a hidden one (often the home) not listable"
)
RUNTIME = (Path("/run"), Path("/var/run"))  # daemons' and the person's sockets: docker, dbus, systemd
CREDENTIALS = (  # under the home: hidden (a folder emptied, a file read as empty) where they exist
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".config/gh",
    ".config/gcloud",
    ".docker/config.json",
    ".docker/run",  # Docker Desktop's sockets
    ".docker/desktop",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
)


@dataclass(frozen=True)
class Sandbox:
    kind: Kind
    binary: str | None = None
    hidden: tuple[Path, ...] = ()
    network: bool = False
    keep: tuple[Path, ...] = ()  # folders under /tmp that commands need (read-only): the venv, PATH
    why: str = ""  # for `refuse`: why no sandbox was found
    abi: int = 0  # for `landlock`: the kernel's Landlock ABI version
    private: tuple[Path, ...] = ()  # the person's credentials and XDG_RUNTIME_DIR (`private_paths`)

    def wrap(
        self, argv: Sequence[str], workspace: Path, cwd: Path, readonly: Sequence[Path] = ()
    ) -> list[str]:
        """`argv` as it runs in this sandbox; `PermissionError` for `refuse`. `readonly`: folders
        inside the workspace bound back read-only (bubblewrap only: Landlock cannot take back a right
        it granted on the workspace)."""
        if self.kind == "refuse":
            raise PermissionError(REFUSED)
        if self.kind == "unsandboxed" or self.binary is None:
            return list(argv)
        if self.kind == "landlock":
            return self._landlock(argv, workspace.resolve(), cwd.resolve())
        args = [self.binary, "--die-with-parent", "--unshare-all", *(["--share-net"] if self.network else [])]
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for folder in RUNTIME:
            if folder.is_dir() and not folder.is_symlink():  # /var/run is mostly a link to /run
                args += ["--tmpfs", str(folder)]
        for path in self.keep:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for path in (*self.private, *self.hidden):  # the workspace, bound after, shows through even so
            if path.is_dir():
                args += ["--tmpfs", str(path.resolve())]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path.resolve())]
        args += ["--bind", str(workspace.resolve()), str(workspace.resolve()), "--chdir", str(cwd.resolve())]
        for path in readonly:
            args += ["--ro-bind", str(path.resolve()), str(path.resolve())]
        return [*args, "--", *argv]

    def _landlock(self, argv: Sequence[str], workspace: Path, cwd: Path) -> list[str]:
        """The launcher (`python -I -S landlock.py`, stdlib only: a fast start) around `argv`."""
        assert self.binary is not None
        args = [self.binary, "-I", "-S", landlock.__file__, "--write", str(workspace)]
        args += ["--tmpdir", str(workspace / LANDLOCK_TMP), "--chdir", str(cwd)]
        for folder in self.keep:
            args += ["--read", str(folder)]
        hide = (Path("/tmp"), *RUNTIME, *self.private, *self.hidden)  # /tmp: as bubblewrap's, empty
        for path in dict.fromkeys(str(p.resolve()) for p in hide):  # /var/run is mostly /run
            args += ["--hide", path]
        return [*args, *(["--network"] if self.network else []), "--", *argv]

    def describe(self) -> str:
        if self.kind == "bubblewrap":
            network = "" if self.network else ", no network"
            return (
                f"sandboxed (bubblewrap: only the workspace writable, credentials and /run hidden{network}; "
                "named unix sockets elsewhere stay reachable)"
            )
        if self.kind == "landlock":
            network = "" if self.network else ", no TCP, no UDP"
            return (
                f"sandboxed (Landlock ABI {self.abi}: only the workspace writable, the run's other folders, "
                f"credentials and /run unreadable{network}; {LANDLOCK_GAPS})"
            )
        if self.kind == "unsandboxed":
            return "UNSANDBOXED (accepted by the person): workers' commands can touch anything you can"
        return f"no sandbox: workers' shell commands are refused ({self.why})"

    def hiding(self, *folders: Path) -> Sandbox:
        """This sandbox with `folders` hidden too."""
        return dataclasses.replace(self, hidden=(*self.hidden, *folders))


def detect(
    *,
    accept_unsandboxed: bool = False,
    hidden: Sequence[Path] = (),
    network: bool = False,
    which: Callable[[str], str | None] = shutil.which,
    landlock_abi: Callable[[], int] = landlock.abi_version,
    home: Path | None = None,
) -> Sandbox:
    """The best sandbox this machine has, checked by running `true` in it. `home`: whose credentials
    to hide (the current user's by default)."""
    keep = _needed_inside(network)
    private = private_paths(_home() if home is None else home, keep)
    binary = which("bwrap")
    why = "bubblewrap is not installed"
    if binary is not None:
        said = _probe(Sandbox("bubblewrap", binary), Path("/tmp"))
        if said is None:
            return Sandbox("bubblewrap", binary, tuple(hidden), network, keep=keep, private=private)
        why = f"bubblewrap does not run here: {said}"
    abi = landlock_abi()
    if abi == 0:
        why += "; this kernel has no Landlock"
    elif abi < LANDLOCK_NETWORK_ABI and not network:
        why += f"; this kernel's Landlock (ABI {abi}) cannot block the network (ABI 4, Linux 6.7, can)"
    else:
        with tempfile.TemporaryDirectory(prefix="hilbert-landlock-probe-") as scratch:
            said = _probe(Sandbox("landlock", sys.executable, abi=abi), Path(scratch))
        if said is None:
            return Sandbox(
                "landlock", sys.executable, tuple(hidden), network, keep=keep, abi=abi, private=private
            )
        why += f"; Landlock does not run here: {said}"
    if accept_unsandboxed:
        return Sandbox("unsandboxed")
    return Sandbox("refuse", why=why)


def _probe(sandbox: Sandbox, workspace: Path) -> str | None:
    """None when `bash -c true` runs in `sandbox` (found on PATH, as commands are), else why not (its
    last line of errors)."""
    try:
        done = subprocess.run(
            sandbox.wrap(["bash", "-c", "true"], workspace, workspace),
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    said = done.stderr.strip().splitlines()
    return None if done.returncode == 0 else (said[-1] if said else f"exit {done.returncode}")


def private_paths(home: Path, keep: Sequence[Path] = ()) -> tuple[Path, ...]:
    """The person's `CREDENTIALS` under `home` and `XDG_RUNTIME_DIR` (their agents' and buses' sockets),
    as named; never one that holds a `keep` path or the interpreter (commands need those)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    candidates = [home / name for name in CREDENTIALS] + ([Path(runtime)] if os.path.isabs(runtime) else [])
    needed = [p.resolve() for p in keep] + [
        Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.executable)
    ]
    return tuple(p for p in candidates if not any(n.is_relative_to(p.resolve()) for n in needed))


def _home() -> Path:
    try:
        return Path.home()
    except RuntimeError:  # no HOME and no password entry: no credentials of its own to hide
        return Path("/nonexistent")


def _needed_inside(network: bool) -> tuple[Path, ...]:
    """What commands need from the folders the sandbox empties: the interpreter's prefixes and the PATH
    folders under /tmp (resolved, outermost first; a venv in a checkout under /tmp keeps working
    inside) or under /run (as written: NixOS puts /run/current-system/sw/bin on PATH), and with the
    network the resolver's configuration where /etc/resolv.conf links into /run — the file only:
    beside it lies systemd-resolved's socket, a way out by DNS."""
    path_entries = [e for e in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(e)]
    found = set()
    for entry in {sys.prefix, sys.base_prefix, sys.exec_prefix, *path_entries}:
        if entry:
            path = Path(entry).resolve()
            if path.is_relative_to("/tmp") and path != Path("/tmp") and path.is_dir():
                found.add(path)
    outermost = [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]
    runtime = [Path(e) for e in path_entries if any(Path(e).is_relative_to(r) for r in RUNTIME)]
    resolver = Path("/etc/resolv.conf").resolve()
    if network and any(resolver.is_relative_to(r) for r in RUNTIME) and resolver.is_file():
        runtime.append(resolver)
    return (*sorted(outermost), *sorted(p for p in set(runtime) if p.exists()))


__all__ = ["INSTALL_HINT", "REFUSED", "Sandbox", "detect"]
