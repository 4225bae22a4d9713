"""Where a worker's shell commands run: a sandbox in which only its workspace is writable and there is
no network — or nowhere, when there is no sandbox and the person has not accepted running without one.

`detect(...)` picks, in order:

- **bubblewrap** (`bwrap`, installed by `make` where apt can): the whole file system read-only (the
  person's repository included), a private `/tmp`, `/dev` and `/proc` (what commands need from the real
  `/tmp` — the interpreter's prefix, folders on PATH — bound back read-only), the `hidden` folders (the
  run's private folder with every other workspace, the git directories and the message key; hilbert's
  home) replaced by empty ones, the workspace bound back writable, every namespace unshared (no network
  unless asked for);
- **unsandboxed**, only when the person accepted it (`--unsandboxed`): commands run as before, and every
  status line says so;
- else **refuse**: a worker's shell command is answered with a tool error saying why, and nothing runs.

Landlock (a kernel feature needing no binary) is the planned fallback between the first two; it is not
built yet, so without bubblewrap hilbert fails closed. `Sandbox.wrap(argv, workspace, cwd)` is the one
seam the shell tool uses.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["bubblewrap", "unsandboxed", "refuse"]
INSTALL_HINT = "install bubblewrap (`make` does where apt can), or pass --unsandboxed to accept the risk"
REFUSED = (
    "refused: this machine has no sandbox for workers' shell commands (bubblewrap is not installed), and "
    "the person did not accept running them unsandboxed; the file tools still work"
)


@dataclass(frozen=True)
class Sandbox:
    kind: Kind
    binary: str | None = None
    hidden: tuple[Path, ...] = ()
    network: bool = False
    keep: tuple[Path, ...] = ()  # folders under /tmp that commands need (read-only): the venv, PATH
    why: str = ""  # for `refuse`: why no sandbox was found

    def wrap(self, argv: Sequence[str], workspace: Path, cwd: Path) -> list[str]:
        """`argv` as it runs in this sandbox; `PermissionError` for `refuse`."""
        if self.kind == "refuse":
            raise PermissionError(REFUSED)
        if self.kind == "unsandboxed" or self.binary is None:
            return list(argv)
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

    def describe(self) -> str:
        if self.kind == "bubblewrap":
            network = "" if self.network else ", no network"
            return f"sandboxed (bubblewrap: only the workspace writable{network})"
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
) -> Sandbox:
    """The best sandbox this machine has, checked by running `true` in it."""
    binary = which("bwrap")
    why = "bubblewrap is not installed"
    if binary is not None:
        probe = Sandbox("bubblewrap", binary).wrap(["true"], Path("/tmp"), Path("/tmp"))
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as error:
            why = f"bubblewrap does not run here: {error}"
        else:
            if done.returncode == 0:
                return Sandbox("bubblewrap", binary, tuple(hidden), network, keep=_needed_under_tmp())
            said = done.stderr.strip().splitlines()
            why = f"bubblewrap does not run here: {said[-1] if said else f'exit {done.returncode}'}"
    if accept_unsandboxed:
        return Sandbox("unsandboxed")
    return Sandbox("refuse", why=why)


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
