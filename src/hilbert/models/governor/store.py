"""The governor's shared state: one SQLite file for every hilbert process on the machine.

Tables: `buckets` (one row per provider-key fingerprint and model: the `BucketState` as JSON) and
`notices` (what the governor did that a person may want to know: the breaker opening or closing, a
fleet-wide pause; `governor_paused` / `governor_resumed` / `governor_throttled`, with the bucket and
why). WAL, so readers never wait; every change is one short `BEGIN IMMEDIATE` transaction (read the
row, run the pure core, write it back), so two processes never interleave inside one decision. A
busy file is waited on (`busy_timeout`), never failed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from hilbert.models.governor.pacing import BucketState, Knobs, adopt

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS buckets (key TEXT PRIMARY KEY, state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notices (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, why TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class Notice:
    at: float
    key: str
    kind: str  # governor_paused | governor_resumed | governor_throttled
    why: str


class GovernorStore:
    """The file, opened once per process (one connection; the governor's callers share it)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, timeout=30.0, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # pacing state: a crash may lose a moment of it
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def update(self, key: str, knobs: Knobs, change: Callable[[BucketState], T]) -> T:
        """Run `change` on the bucket's state in one transaction and save what it left."""
        with self._immediate() as db:
            row = db.execute("SELECT state FROM buckets WHERE key = ?", (key,)).fetchone()
            if row is None:
                state = BucketState.new(knobs, time.time())
            else:
                state = BucketState.from_json(json.loads(row[0]))
                adopt(state, knobs, time.time())  # an earlier run may have had other settings
            result = change(state)
            db.execute(
                "INSERT INTO buckets (key, state) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET state = excluded.state",
                (key, json.dumps(state.to_json())),
            )
            return result

    def state(self, key: str) -> BucketState | None:
        """The bucket's state as saved (for views and tests); None before its first call."""
        row = self._db.execute("SELECT state FROM buckets WHERE key = ?", (key,)).fetchone()
        return BucketState.from_json(json.loads(row[0])) if row else None

    def notice(self, key: str, kind: str, why: str) -> None:
        with self._immediate() as db:
            db.execute(
                "INSERT INTO notices (at, key, kind, why) VALUES (?, ?, ?, ?)", (time.time(), key, kind, why)
            )

    def notices(self, key: str | None = None) -> list[Notice]:
        query = "SELECT at, key, kind, why FROM notices" + (" WHERE key = ?" if key else "") + " ORDER BY id"
        return [Notice(*row) for row in self._db.execute(query, (key,) if key else ())]


def read_file(
    path: Path, keep: Callable[[str], bool], since: float = 0.0, notices: int = 50
) -> tuple[dict[str, BucketState], list[Notice]]:
    """The buckets whose key `keep` keeps in the governor's file at `path`, and their newest `notices`
    since `since` (others' notices never crowd them out), opened read-only: a view's look, which
    creates, writes and waits for nothing. A WAL file is read through its `-wal` and `-shm` while a
    writer keeps them; with none there (no process has it open) it is read as it is, so that no reader
    leaves them behind. Empty when there is no file or it cannot be read; a bucket an older hilbert
    wrote in another shape is left out."""
    if not path.is_file():
        return {}, []
    settled = not path.with_name(path.name + "-wal").exists()  # no writer: nothing but the file
    uri = f"{path.resolve().as_uri()}?{'immutable=1' if settled else 'mode=ro'}"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=1.0)
    except sqlite3.Error:
        return {}, []
    try:
        rows = [(key, state) for key, state in db.execute("SELECT key, state FROM buckets") if keep(key)]
        keys = [key for key, _ in rows]
        kept = db.execute(
            f"SELECT at, key, kind, why FROM notices WHERE at >= ? AND key IN ({', '.join('?' * len(keys))})"
            " ORDER BY id DESC LIMIT ?",
            (since, *keys, notices),
        ).fetchall()
    except sqlite3.Error:
        return {}, []
    finally:
        db.close()
    buckets = {}
    for key, state in rows:
        try:
            buckets[key] = BucketState.from_json(json.loads(state))
        except (ValueError, TypeError, KeyError, AttributeError):  # not a mapping, or not this shape
            continue
    return buckets, [Notice(*row) for row in reversed(kept) if row[1] in buckets]
