"""Fixtures for the event-store tests: writer processes (`store_writer.py`) and a log-checking helper."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import hilbert

WRITER = Path(__file__).with_name("store_writer.py")
SRC = Path(hilbert.__file__).resolve().parents[1]

Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn_writer() -> Iterator[Spawn]:
    """Start `store_writer.py` with the given arguments (stdin/stdout piped, text mode); every
    process still alive at the end of the test is killed."""
    started: list[subprocess.Popen[str]] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}

    def spawn(*args: object) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        started.append(proc)
        return proc

    yield spawn
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def _integrity(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


@pytest.fixture
def integrity() -> Callable[[Path], str]:
    """`PRAGMA integrity_check` of an SQLite file ("ok" when sound), from a fresh connection."""
    return _integrity
