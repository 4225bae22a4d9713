"""What the command line builds once, at the edge, from the settings, and passes down whole: the command
runner (`command_runner`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from hilbert.commands import Limits, Runner, Timeouts, command_env
from hilbert.errors import UserError
from hilbert.security.sandbox import INSTALL_HINT, detect
from hilbert.settings import Settings

COMMAND_CPU_S = 600  # CPU seconds one command may use


def command_runner(settings: Settings, env: Mapping[str, str] | None = None) -> Runner:
    """The one runner every command of this invocation goes through, built from the settings: the best
    sandbox this machine has (or none, by name, when the person passed --unsandboxed) with hilbert's
    home hidden, the command policy, `env` (default: this process's) without secrets, the limits,
    timeouts and command slots. A `UserError` when there is no sandbox and the person has not accepted
    running without one (hilbert fails closed, before anything has started)."""
    sandbox = detect(accept_unsandboxed=settings.unsandboxed)
    if sandbox.kind == "refuse":
        raise UserError(f"no sandbox for workers' shell commands: {sandbox.why}", hint=INSTALL_HINT)
    return Runner(
        sandbox.hiding(settings.home),  # hilbert's home: other runs, their keys and logs
        command_env(env),
        limits=Limits(cpu_s=COMMAND_CPU_S),
        timeouts=Timeouts(shell_s=settings.shell_timeout_s),
        slots=asyncio.Semaphore(max(1, os.cpu_count() or 1)),
    )
