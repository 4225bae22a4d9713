"""Migrations: a new file, every older version brought to the current one with its data intact, and
files the store must refuse.

Adding a migration: append it to `schema.MIGRATIONS`; `test_every_older_version_migrates` then also
starts from the version before it. If the new version changes what a row looks like, add a seed for
it to `SEEDS` (the rows written by a file at that version) and extend `check_seeded`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from hilbert.errors import UserError
from hilbert.models.types import Message
from hilbert.store import EventStore
from hilbert.store.blobs import encode_blob
from hilbert.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate


def seed_v1(db: sqlite3.Connection) -> None:
    """Rows as a version-1 file holds them: events only."""
    db.execute(
        "INSERT INTO events (run, agent, seq, time, kind, data) VALUES (?, ?, ?, ?, ?, ?)",
        ("r1", "alice", 1, 1_700_000_000.5, "agent_started", '{"task":"old task"}'),
    )


def seed_v2(db: sqlite3.Connection) -> None:
    """Version 2 adds blobs."""
    seed_v1(db)
    key, text = encode_blob(Message("user", "hello from v2").to_json())
    db.execute("INSERT INTO blobs (hash, data) VALUES (?, ?)", (key, text))


SEEDS: dict[int, Callable[[sqlite3.Connection], None]] = {1: seed_v1, 2: seed_v2}


def make_file_at(path: Path, version: int) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, path=str(path), migrations=MIGRATIONS[:version])
    seed = SEEDS[max(v for v in SEEDS if v <= version)]
    seed(db)
    db.close()


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def test_a_new_file_gets_the_current_schema_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "events.db"
    with EventStore.open(path) as store:
        assert store.events() == []
    assert user_version(path) == SCHEMA_VERSION
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert {"events", "blobs"} <= tables


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_every_older_version_migrates_and_keeps_its_data(tmp_path: Path, version: int) -> None:
    path = tmp_path / "events.db"
    make_file_at(path, version)
    assert user_version(path) == version

    with EventStore.open(path) as store:
        (old,) = store.events()
        assert (old.run, old.agent, old.seq, old.kind) == ("r1", "alice", 1, "agent_started")
        assert old.data == {"task": "old task"}
        assert old.time == 1_700_000_000.5
        new = store.append("r1", "alice", "agent_stopped", {"status": "finished"})
        assert new.seq == 2 and new.id > old.id
        if version >= 2:
            key = encode_blob(Message("user", "hello from v2").to_json())[0]
            assert store.get_messages([key]) == [Message("user", "hello from v2")]
        assert store.put_messages([Message("user", "hi")])  # blobs work after any migration
    assert user_version(path) == SCHEMA_VERSION


def test_reopening_a_current_file_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    with EventStore.open(path) as store:
        store.append("r", "a", "k", {"n": 1})
    with EventStore.open(path) as store:
        assert [e.data for e in store.events()] == [{"n": 1}]
    assert user_version(path) == SCHEMA_VERSION


def test_a_file_from_a_newer_hilbert_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    EventStore.open(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(UserError) as caught:
        EventStore.open(path)
    assert "newer hilbert" in (caught.value.hint or "")
    assert user_version(path) == SCHEMA_VERSION + 1  # untouched


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    path.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(UserError, match="not a usable hilbert event log"):
        EventStore.open(path)


def test_the_log_cannot_be_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    with EventStore.open(path) as store:
        store.append("r", "a", "k", {"n": 1})
        store.put_messages([Message("user", "x")])
    db = sqlite3.connect(path)
    for statement in (
        "UPDATE events SET kind = 'forged'",
        "DELETE FROM events",
        "UPDATE blobs SET data = '{}'",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute(statement)
    db.close()
    with EventStore.open(path) as store:
        assert [(e.kind, e.data) for e in store.events()] == [("k", {"n": 1})]
