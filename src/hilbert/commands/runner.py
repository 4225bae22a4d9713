"""The one command runner: every shell command hilbert runs for an agent or a check goes through it.

A `Runner` is built once, at the edge (the CLI, the demo, a test), with everything that decides how a
command runs — the sandbox, the command policy, the environment, the per-command limits, the timeouts
and the fleet-wide command slots — and is passed down whole. Workers' and the lead's shell tools, the
stop gate's verify, integrity and held-out runs, the merge checks and the Stop hook all call
`Runner.run(command, root=...)`; nothing else starts a shell.

- **Sandbox.** Always one (`hilbert.security.sandbox.Sandbox`). Running unconfined is a deliberate,
  named choice: `Runner.unsandboxed(...)` (the CLI's `--unsandboxed`, library use, tests), whose
  `describe()` says so; a `refuse` sandbox answers every command with a refusal and runs nothing.
  `root` is the only writable folder inside the sandbox.
- **Policy.** A command a model wrote (`screened=True`: the agents' shell tools) is read by the command
  policy first (`hilbert.security.policy.check_shell`); a refusal is returned, nothing runs. The
  person's own commands (the project's test command) and the plan's verify commands are not screened
  — the sandbox still holds them.
- **Environment.** `command_env`: the given one without keys, tokens, agent sockets and `GIT_*`;
  every command also carries the run's `mark` (`HILBERT_RUN_MARK`, `hilbert.commands.leftovers`), which
  everything it starts inherits, so a later process can kill what a dead run left running
  (`kill_marked`). A fresh token by default; `marked(token)` gives the run's own.
- **Timeouts.** Each call names its `Timeout` — seconds and the setting that gave them, so a command
  that ran past it says which setting to raise (`[hilbert: … timed out after 600 s (timeouts.verify_s)]`).
  `on_wait` hears every `progress_s` seconds that a long command is still running.

What must not live here: deciding what a command's result means (the gate, the merge queue), or git
(the harness's git runs unsandboxed through `hilbert.workspaces.git`, on the same `run_process`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilbert.commands.leftovers import marking, new_mark
from hilbert.commands.process import Limits, Output, run_process
from hilbert.security.policy import check_shell
from hilbert.security.redact import looks_secret
from hilbert.security.sandbox import REFUSED, Sandbox
from hilbert.settings import TimeoutSettings

# Variables that lead a command to something of the person's that would act for it — an ssh or gpg
# agent, the session bus, a display, a container daemon, a terminal multiplexer — beside every name
# ending in SOCK or SOCKET (SWAYSOCK, PODMAN_SOCK, ...). The sandboxes hide those sockets too.
AGENT_VARIABLES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "SSH_ASKPASS",
        "GPG_AGENT_INFO",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XAUTHORITY",
        "DOCKER_HOST",
        "CONTAINER_HOST",
        "TMUX",
        "STY",
        "KRB5CCNAME",
    }
)
REFUSED_EXIT = 126  # what a shell answers for a command it may not run


def command_env(
    env: Mapping[str, str] | None = None, *, hilbert_python_first: bool = False
) -> dict[str, str]:
    """The environment commands run with: the given (or current) one without API keys, tokens and
    other secrets, the way to the person's agents (`AGENT_VARIABLES`), nor `GIT_*` (a harness started
    from a git hook would otherwise point the commands' git at the person's repository). No bytecode
    is written: two same-sized edits within one second would otherwise share a stale `.pyc` and a
    test run could see the old code. `hilbert_python_first` puts the interpreter hilbert runs on first
    on PATH — for the demo and tests, whose sample projects need its pytest; never for a user's
    project, whose own `python` must stay the one it finds."""
    clean = {k: v for k, v in (os.environ if env is None else env).items() if not _withheld(k)}
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    if hilbert_python_first:
        clean["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), clean.get("PATH", os.defpath)])
    return clean


def _withheld(name: str) -> bool:
    upper = name.upper()
    return (
        looks_secret(name)
        or upper in AGENT_VARIABLES
        or upper.endswith(("SOCK", "SOCKET"))
        or upper.startswith("GIT_")
    )


@dataclass(frozen=True)
class Timeout:
    """How long a command may run, and the setting that says so (named when it fires)."""

    seconds: float
    setting: str

    def describe(self) -> str:
        return f"{self.seconds:g} s ({self.setting})"


def shell_timeout(timeouts: TimeoutSettings, asked: float | None = None) -> Timeout:
    """An agent's shell command: `timeouts.shell_s`, or less when the model asks for less."""
    seconds = timeouts.shell_s if not asked or asked <= 0 else min(asked, timeouts.shell_s)
    return Timeout(seconds, "timeouts.shell_s")


def verify_timeout(timeouts: TimeoutSettings) -> Timeout:
    """One run of the stop gate's verify, tests-restored or held-out tests."""
    return Timeout(timeouts.verify_s, "timeouts.verify_s")


def merge_timeout(timeouts: TimeoutSettings) -> Timeout:
    """One merge check: a candidate's verify, the project's tests."""
    return Timeout(timeouts.merge_s, "timeouts.merge_s")


class Slots:
    """At most `count` commands at once, for everyone holding the same `Slots`. One semaphore per event
    loop: a command line may run two (`hilbert run GOAL` plans in one, then runs the plan in another),
    and an asyncio semaphore belongs to the loop it first waited in."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._by_loop:
            self._by_loop[loop] = asyncio.Semaphore(self.count)
        return self._by_loop[loop]

    async def __aenter__(self) -> None:
        await self._semaphore().acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._semaphore().release()


@dataclass(frozen=True)
class Ran:
    """What one command did: its exit status (None: it ran past its timeout), its output, and why it
    did not run at all (`refused`: the policy or a `refuse` sandbox)."""

    command: str
    exit_code: int | None
    output: Output
    timeout: Timeout
    refused: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None and self.refused is None

    def status(self) -> str:
        """`exit 0`, `timed out after 600 s (timeouts.verify_s)`, `refused`, or
        `exit 152: killed by SIGXCPU (the CPU-time limit, commands.cpu_s)`."""
        if self.refused is not None:
            return "refused"
        if self.exit_code is None:
            return f"timed out after {self.timeout.describe()}"
        code = self.exit_code
        number = -code if code < 0 else code - 128 if code - 128 in (signal.SIGXCPU, signal.SIGKILL) else 0
        if number == signal.SIGXCPU:
            return f"exit {code}: killed by SIGXCPU (the CPU-time limit, commands.cpu_s)"
        if number:
            name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
            return f"exit {code}: killed by {name}"
        return f"exit {code}"

    def text(self, root: Path) -> str:
        """The output as a reader sees it, ending with what the harness did to it."""
        if self.refused is not None:
            return self.refused
        text = self.output.render()
        if self.exit_code is None:
            text += f"\n[hilbert: `{_short(self.command)}` {self.status()}; killed]"
        return text


@dataclass(frozen=True)
class Runner:
    """Runs `bash -c COMMAND` with `root` the one writable folder: in `sandbox`, with `env`, `limits`,
    at most `slots` commands at once (shared by everyone holding this runner), the command policy on
    screened commands. Build it once at the edge; derive variants with `hiding` / `replace`."""

    sandbox: Sandbox
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))  # scrubbed when built
    limits: Limits = field(default_factory=Limits)
    timeouts: TimeoutSettings = field(default_factory=TimeoutSettings)  # the `timeouts` settings
    policy: bool = True  # screen the commands models write; off only to measure what the policy stops
    slots: Slots | None = field(
        default_factory=lambda: Slots(os.cpu_count() or 1), compare=False
    )  # None: none
    mark: str = field(default_factory=new_mark)  # every command's HILBERT_RUN_MARK: see `marked`

    def __post_init__(self) -> None:  # whatever it was given, no secret reaches a command
        object.__setattr__(self, "env", command_env(self.env))
        if not self.mark or "," in self.mark:
            raise ValueError(f"a run's mark is a token without commas, not {self.mark!r}")

    @classmethod
    def unsandboxed(cls, env: Mapping[str, str] | None = None, **options: Any) -> Runner:
        """A runner without a sandbox, by name: commands can touch anything the person can."""
        return cls(Sandbox("unsandboxed"), os.environ if env is None else env, **options)

    def marked(self, mark: str) -> Runner:
        """This runner with the run's own `mark` (stored in its log): after the run dies, a later
        process kills what its commands left running with `hilbert.commands.leftovers.kill_marked`."""
        return dataclasses.replace(self, mark=mark)

    def with_env(self, env: Mapping[str, str], *, drop: tuple[str, ...] = ()) -> Runner:
        """This runner with `env` set over its environment and the names in `drop` removed (scrubbed
        as ever: no secret gets in this way either)."""
        merged = {k: v for k, v in self.env.items() if k not in drop}
        return dataclasses.replace(self, env={**merged, **env})

    def hiding(self, *folders: Path) -> Runner:
        """This runner with `folders` hidden from its commands too."""
        return dataclasses.replace(self, sandbox=self.sandbox.hiding(*folders))

    def describe(self) -> str:
        """The sandbox, and what of a command's limits this machine cannot enforce."""
        groups = self.limits.groups
        missing = f"; {groups.describe()}" if groups is not None and groups.missing else ""
        return self.sandbox.describe() + missing

    async def run(
        self,
        command: str,
        *,
        root: Path,
        timeout: Timeout,
        cwd: Path | None = None,
        output: Output | None = None,
        screened: bool = False,
        on_wait: Callable[[float], None] | None = None,
        pass_fds: tuple[int, ...] = (),
        readonly: tuple[Path, ...] = (),
    ) -> Ran:
        """Run `command` in `cwd` (default `root`), only `root` writable; never raises for the
        command's own failure. `screened`: a model wrote it, so the command policy reads it first.
        `pass_fds`: descriptors the command inherits, under the same numbers (through the sandbox);
        `readonly`: folders under `root` it cannot write (where the sandbox can: `Sandbox.wrap`)."""
        root = root.resolve()
        cwd = (cwd or root).resolve()
        output = output or Output(6000, lambda: None)
        if self.sandbox.kind == "refuse":
            return Ran(command, REFUSED_EXIT, output, timeout, refused=REFUSED)
        if screened and self.policy:
            refusal = check_shell(command, root)
            if refusal is not None:
                return Ran(command, REFUSED_EXIT, output, timeout, refused=str(refusal))
        argv = self.sandbox.wrap(["bash", "-c", command], root, cwd, readonly)
        waiting = (self.timeouts.progress_s, on_wait) if on_wait else None
        async with self.slots or contextlib.nullcontext():
            try:
                code = await run_process(
                    argv,
                    cwd=cwd,
                    env=marking(self.env, self.mark),
                    timeout_s=timeout.seconds,
                    stdout=output.add,
                    limits=self.limits,
                    waiting=waiting,
                    pass_fds=pass_fds,
                )
            finally:
                output.close()
        return Ran(command, code, output, timeout)


def _short(command: str, limit: int = 80) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


__all__ = [
    "Ran",
    "Runner",
    "Slots",
    "Timeout",
    "command_env",
    "merge_timeout",
    "shell_timeout",
    "verify_timeout",
]
