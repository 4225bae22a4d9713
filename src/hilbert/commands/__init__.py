"""Running commands: `run_process`, the one place a process starts (`process`), `Runner`, the one
command runner every agent's and check's shell command goes through (`runner`), and `kill_marked`,
which kills what a dead run's commands left running (`leftovers`)."""

from hilbert.commands.leftovers import kill_marked, new_mark
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
    "kill_marked",
    "merge_timeout",
    "new_mark",
    "run_process",
    "shell_timeout",
    "verify_timeout",
]
