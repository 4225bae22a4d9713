"""The store never adopts somebody else's SQLite file, and bad paths are one-line errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hilbert.errors import UserError
from hilbert.store import EventStore


@pytest.mark.parametrize("user_version", [0, 1, 2, 7])
def test_a_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path: Path, user_version: int) -> None:
    other = tmp_path / "bookmarks.db"
    with sqlite3.connect(other) as db:
        db.execute("create table bookmarks (url text)")
        db.execute(f"pragma user_version = {user_version}")
    before = other.read_bytes()
    with pytest.raises(UserError, match="not a hilbert event log"):
        EventStore.open(other)
    assert other.read_bytes() == before
    with sqlite3.connect(other) as db:
        assert db.execute("pragma journal_mode").fetchone()[0] == "delete"


def test_a_folder_that_cannot_be_made_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="cannot create the folder"):
        EventStore.open(tmp_path / "file" / "sub" / "log.db")
