"""For the sandbox tests: a run's folder as the fleet lays it out (two workspaces, the peer's holding
work, and the message key beside them), and a loopback listener to try the network with."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def two_workspaces(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The run's folder, this worker's (empty) workspace and a peer's, with `work.py` in it."""
    run_root = tmp_path / "run"
    mine, theirs = run_root / "workspaces" / "noether", run_root / "workspaces" / "gauss"
    for folder in (mine, theirs):
        folder.mkdir(parents=True)
    (theirs / "work.py").write_text("precious = True\n")
    (run_root / "message.key").write_text("00" * 32)
    return run_root, mine, theirs


@contextmanager
def tcp_listener() -> Iterator[str]:
    """A TCP listener on loopback for as long as the block runs; yields a shell command connecting to it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        yield f'{sys.executable} -c "{connect}"'
    finally:
        server.close()
