"""Running commands: `run_process`, the one place a process starts (`process`), and `Runner`, the one
command runner every agent's and check's shell command goes through (`runner`)."""

from hilbert.commands.process import Limits, Output, run_process
from hilbert.commands.runner import (
    Ran,
    Runner,
    Slots,
    Timeout,
    command_env,
    merge_timeout,
    shell_timeout,
    verify_timeout,
)

__all__ = [
    "Limits",
    "Output",
    "Ran",
    "Runner",
    "Slots",
    "Timeout",
    "command_env",
    "merge_timeout",
    "run_process",
    "shell_timeout",
    "verify_timeout",
]
