"""Where a worker's shell commands run: a sandbox in which only its workspace is writable and there is
no network — or nowhere, when there is no sandbox and the person has not accepted running without one.

`detect(...)` picks, in order, the first that really runs `bash -c true` (as commands run):

- **bubblewrap** (`bwrap`, installed by `make` where apt can): the whole file system read-only (the
  person's repository included), a private `/tmp`, `/dev` and `/proc` (what commands need from the real
  `/tmp` — the interpreter's prefix, folders on PATH — bound back read-only), the `hidden` folders (the
  run's private folder with every other workspace, the git directories and the message key; hilbert's
  home) replaced by empty ones, the workspace bound back writable, every namespace unshared (no network
  unless asked for);
- **landlock** (the kernel's own sandbox, no binary needed; `hilbert.security.landlock` is the
  launcher): the same walls drawn as access rights — the file system readable but the `hidden` folders
  and `/tmp` (what commands need from it bound back), only the workspace writable, `TMPDIR` a folder
  inside it (`.hilbert/tmp`, git-ignored), no TCP (needs Landlock ABI 4, Linux 6.7, unless the network
  is allowed). What it does not do that bubblewrap does is in `LANDLOCK_GAPS`;
- **unsandboxed**, only when the person accepted it (`--unsandboxed`): commands run as before, and every
  status line says so;
- else **refuse**: a worker's shell command is answered with a tool error saying why, and nothing runs.

`Sandbox.wrap(argv, workspace, cwd)` is the one seam the shell tool uses. `detect`'s `which=` and
`landlock_abi=` let tests take either sandbox away.
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
    "the machine's own /proc, /dev and /dev/shm, UDP and named unix sockets not blocked, no loopback TCP"
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

    def wrap(self, argv: Sequence[str], workspace: Path, cwd: Path) -> list[str]:
        """`argv` as it runs in this sandbox; `PermissionError` for `refuse`."""
        if self.kind == "refuse":
            raise PermissionError(REFUSED)
        if self.kind == "unsandboxed" or self.binary is None:
            return list(argv)
        if self.kind == "landlock":
            return self._landlock(argv, workspace.resolve(), cwd.resolve())
        args = [self.binary, "--die-with-parent", "--unshare-all", *(["--share-net"] if self.network else [])]
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for folder in self.keep:
            if folder.is_dir():
                args += ["--ro-bind", str(folder), str(folder)]
        for folder in self.hidden:  # emptied; the workspace, bound after, shows through even inside one
            if folder.is_dir():
                args += ["--tmpfs", str(folder.resolve())]
        args += ["--bind", str(workspace.resolve()), str(workspace.resolve()), "--chdir", str(cwd.resolve())]
        return [*args, "--", *argv]

    def _landlock(self, argv: Sequence[str], workspace: Path, cwd: Path) -> list[str]:
        """The launcher (`python -I -S landlock.py`, stdlib only: a fast start) around `argv`."""
        assert self.binary is not None
        args = [self.binary, "-I", "-S", landlock.__file__, "--write", str(workspace)]
        args += ["--tmpdir", str(workspace / LANDLOCK_TMP), "--chdir", str(cwd)]
        for folder in self.keep:
            args += ["--read", str(folder)]
        for folder in (Path("/tmp"), *self.hidden):  # /tmp: as bubblewrap's private one, nothing shows
            args += ["--hide", str(folder.resolve())]
        return [*args, *(["--network"] if self.network else []), "--", *argv]

    def describe(self) -> str:
        if self.kind == "bubblewrap":
            network = "" if self.network else ", no network"
            return f"sandboxed (bubblewrap: only the workspace writable{network})"
        if self.kind == "landlock":
            network = "" if self.network else ", no TCP"
            return (
                f"sandboxed (Landlock ABI {self.abi}: only the workspace writable, the run's other folders "
                f"unreadable{network}; {LANDLOCK_GAPS})"
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
) -> Sandbox:
    """The best sandbox this machine has, checked by running `true` in it."""
    binary = which("bwrap")
    why = "bubblewrap is not installed"
    if binary is not None:
        said = _probe(Sandbox("bubblewrap", binary), Path("/tmp"))
        if said is None:
            return Sandbox("bubblewrap", binary, tuple(hidden), network, keep=_needed_under_tmp())
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
            keep = _needed_under_tmp()
            return Sandbox("landlock", sys.executable, tuple(hidden), network, keep=keep, abi=abi)
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


def _needed_under_tmp() -> tuple[Path, ...]:
    """The interpreter's prefixes and the PATH folders that live under /tmp (which the sandbox replaces),
    resolved, outermost first; a venv in a checkout under /tmp keeps working inside."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, *os.environ.get("PATH", "").split(os.pathsep)}
    found = set()
    for entry in candidates:
        if entry:
            path = Path(entry).resolve()
            if path.is_relative_to("/tmp") and path != Path("/tmp") and path.is_dir():
                found.add(path)
    outermost = [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]
    return tuple(sorted(outermost))


__all__ = ["INSTALL_HINT", "REFUSED", "Sandbox", "detect"]
