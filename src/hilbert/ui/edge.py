"""What the command line builds once, at the edge, from the settings, and passes down whole: the command
runner (`command_runner`)."""

from __future__ import annotations

from collections.abc import Mapping

from hilbert.commands import Limits, Runner, Slots, command_env
from hilbert.commands.groups import CommandGroups
from hilbert.errors import UserError
from hilbert.security.sandbox import INSTALL_HINT, detect
from hilbert.settings import Settings


def command_runner(
    settings: Settings, env: Mapping[str, str] | None = None, *, refuse_without_sandbox: bool = False
) -> Runner:
    """The one runner every command of this invocation goes through, built from the settings: the best
    sandbox this machine has (or none, by name, when the person passed --unsandboxed) with hilbert's
    home hidden, the command policy (`commands.shell_policy`), `env` (default: this process's) without
    secrets, the limits and slots (`commands.*`) and the timeouts (`timeouts.*`). A `UserError` when
    there is no sandbox and the person has not accepted running without one (hilbert fails closed,
    before anything has started)."""
    sandbox = detect(accept_unsandboxed=settings.unsandboxed)
    if sandbox.kind == "refuse":
        raise UserError(f"no sandbox for workers' shell commands: {sandbox.why}", hint=INSTALL_HINT)
    commands = settings.commands
    return Runner(
        sandbox.hiding(settings.home),  # hilbert's home: other runs, their keys and logs
        command_env(env),
        limits=Limits(
            cpu_s=commands.cpu_s or None,
            memory_mb=commands.memory_mb or None,
            file_mb=commands.file_mb or None,
            processes=commands.processes or None,
            group_memory_mb=commands.group_memory_mb or None,
            groups=CommandGroups.detect(),
        ),
        timeouts=settings.timeouts,
        policy=commands.shell_policy,
        slots=Slots(commands.slots),
    )
