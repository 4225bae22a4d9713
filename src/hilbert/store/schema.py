"""The event log's schema, as a list of migrations, and the code that brings a file up to date.

`MIGRATIONS[i]` takes a database from schema version `i` to `i + 1`; the version a file is at lives
in `PRAGMA user_version`. To change the schema, append a function to the list: never edit or
reorder one that has shipped, because files in the wild were built by it. Each migration runs in
its own `BEGIN IMMEDIATE` transaction together with the `user_version` bump, so a crash leaves the
file at the old or the new version, never between, and two processes opening a fresh file at once
do not both migrate it.

The tables:

- `events`: the append-only log. `id` is global and increases in commit order; `seq` numbers the
  events of one (run, agent) from 1 with no gaps. `time` is Unix seconds; `data` is a JSON object.
  Triggers refuse UPDATE and DELETE.
- `blobs`: JSON values (conversation messages) keyed by the SHA-256 of their canonical JSON
  (`hilbert.store.blobs`), stored once, never changed.

What must not live here: queries (that is `event_store`), or knowledge of event kinds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from hilbert.errors import UserError

Migration = Callable[[sqlite3.Connection], None]


def _v1_events(db: sqlite3.Connection) -> None:
    db.execute(
        """
        CREATE TABLE events (
            id    INTEGER PRIMARY KEY AUTOINCREMENT,
            run   TEXT    NOT NULL,
            agent TEXT    NOT NULL,
            seq   INTEGER NOT NULL,
            time  REAL    NOT NULL,
            kind  TEXT    NOT NULL,
            data  TEXT    NOT NULL
        )
        """
    )
    db.execute("CREATE UNIQUE INDEX events_by_agent ON events (run, agent, seq)")


def _v2_blobs_and_append_only(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE blobs (hash TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID")
    # Counting or finding the events of one kind for one agent (turn numbers, rebuilding a
    # conversation) reads this index instead of the agent's whole history.
    db.execute("CREATE INDEX events_by_kind ON events (run, agent, kind, id)")
    for table, action in (("events", "UPDATE"), ("events", "DELETE"), ("blobs", "UPDATE")):
        db.execute(
            f"""
            CREATE TRIGGER {table}_no_{action.lower()} BEFORE {action} ON {table}
            BEGIN SELECT RAISE(ABORT, '{table} are append-only'); END
            """
        )


MIGRATIONS: list[Migration] = [_v1_events, _v2_blobs_and_append_only]
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection, *, path: str, migrations: list[Migration] = MIGRATIONS) -> int:
    """Bring `db` (a connection in autocommit mode) up to `len(migrations)`; return the version it
    was at. Raises `UserError` for a file written by a newer hilbert."""
    found = schema_version(db)
    _refuse_newer(found, len(migrations), path)
    while (version := schema_version(db)) < len(migrations):
        db.execute("BEGIN IMMEDIATE")
        try:
            version = schema_version(db)  # another process may have migrated while we waited
            _refuse_newer(version, len(migrations), path)
            if version < len(migrations):
                migrations[version](db)
                db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    return found


def _refuse_newer(version: int, known: int, path: str) -> None:
    if version > known:
        raise UserError(
            f"the event log {path} has schema version {version}, but this hilbert knows only up to {known}",
            hint="it was written by a newer hilbert: upgrade hilbert, or point it at another store file",
        )
