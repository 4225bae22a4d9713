"""The fake server in a process of its own (benchmarks, CLI tests): start it, learn its URL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

from hilbert.errors import RunError


def start_process(
    *flags: str,
    env: dict[str, str] | None = None,
    program: Sequence[str] = ("-m", "hilbert.testing.fake_server"),
) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m hilbert.testing.fake_server --port 0 FLAGS...`; return the process and its base
    URL once it listens. The caller stops it (terminate, then wait). `program` replaces what follows
    `python`, e.g. `("-m", "hilbert.ui.cli", "fake-server")` for the CLI, which also knows the
    simulation's responders."""
    command = [sys.executable, *program, "--port", "0", *flags]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("fake-server listening on "):
        server.kill()
        server.wait()
        raise RunError(f"the fake server did not start: {line.strip()!r}")
    return server, line.split()[3]
