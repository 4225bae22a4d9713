"""Running the `hilbert` command line as a person would, in a child process: shared by the tests that
drive it (each decides the environment it runs with)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run_cli(
    *args: str, cwd: Path | None, env: Mapping[str, str], stdin: str | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    """`hilbert ARGS` with this interpreter, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "hilbert.ui.cli", *args],
        cwd=cwd,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
