"""`EventStore`: the append-only event log and message blobs in one SQLite file.

The log is hilbert's single source of truth; every view reads it, and several processes may
append to and read one file at once (a run, a person's `hilbert log --follow`, a hook).

Guarantees:

- `append` returns only after its event is committed (write-ahead: act after it returns).
- The per-(run, agent) `seq` is allocated inside a `BEGIN IMMEDIATE` transaction, which takes the
  file's one write lock before reading the last `seq`; concurrent writers in any number of processes
  therefore get gapless, unique `seq`s, and `id` order is commit order. A follower that has seen
  `id = n` has seen every event with a smaller id (a smaller id always commits first).
- SQLite runs in WAL mode. With the default `durability="normal"` (`synchronous=NORMAL`) a commit is
  written to the WAL before `append` returns, so it survives the process crashing or being killed
  (SIGKILL) at any point; only a power loss or OS crash may lose the last commits (the file stays
  consistent). `durability="full"` (`synchronous=FULL`) fsyncs every commit and survives power loss
  too, at the cost of a disk flush per event.
- Writers wait for the lock with short jittered retries, so that they take turns, for up to
  `busy_timeout_s`; then `RunError`.
- A write that fails because the disk is full (SQLITE_FULL) is never half done and never dropped:
  with an `on_full` hook (the fleet's disk guard, `hilbert.fleet.disk`, which gives up its reserve)
  it is tried again, at once and then every second at most, for as long as the hook says to wait;
  without one, or when the hook gives up, it is a `RunError` saying the disk is full. The caller acts
  on an event only once `append` returned, so an event that was acted on is in the log.
- Nothing secret is written: every event's data and every message pass through the store's
  `Redactor` (`hilbert.security.redact`; by default built from the environment when the store is
  opened) before they reach the file, so the log, its WAL and every view that reads them hold `***`
  where a key was. A message's blob key is the hash of its redacted form.

Methods are synchronous: each is one short indexed statement, fast enough for the agent loop to call
inline. `follow` is the exception: it waits for other processes, so it is an async iterator that
sleeps between polls without blocking the event loop it runs in (the CLI's single `asyncio.run`,
later the TUI and web server).

What must not live here: the meaning of event kinds (see `kinds`, `conversation`, `summary`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from hilbert.errors import RunError, UserError
from hilbert.models.types import Message
from hilbert.security.redact import Redactor
from hilbert.store.blobs import encode_blob
from hilbert.store.schema import migrate

Durability = Literal["normal", "full"]
T = TypeVar("T")

_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_FULL = 5, 6, 13
_MAX_WAIT_S = 0.01  # longest sleep between two tries for a locked file
_MAX_FULL_WAIT_S = 1.0  # longest sleep between two tries on a full disk
_STORED_MEMO = 1 << 16  # messages whose blob key put_messages remembers
_CHUNK = 500  # rows or bound parameters per statement; well under SQLite's limits
_COLUMNS = "id, run, agent, seq, time, kind, data"


@dataclass(frozen=True)
class Event:
    """One committed row of the log. `id` is global (commit order); `seq` counts this (run, agent)'s
    events from 1; `time` is Unix seconds; `data` is the kind's JSON object (do not mutate it)."""

    id: int
    run: str
    agent: str
    seq: int
    time: float
    kind: str
    data: dict[str, Any]


class EventStore:
    """The event log in one SQLite file. Build it with `EventStore.open(path)`; close it (or use it
    as a context manager). One instance may be shared by the threads of a process; each process
    (a forked child too) opens its own."""

    def __init__(
        self, db: sqlite3.Connection, path: Path, *, busy_timeout_s: float, redactor: Redactor
    ) -> None:
        self._db = db
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._redactor = redactor
        self._stored: dict[int, tuple[Message, str]] = {}  # id -> (message, blob key): put_messages' memo
        self._lock = threading.Lock()
        self._jitter = random.Random()
        self._observer: Callable[[Event], None] | None = None
        self._on_full: Callable[[], bool] | None = None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "normal",
        busy_timeout_s: float = 30.0,
        redactor: Redactor | None = None,
    ) -> EventStore:
        """Open (creating it and its parent folders if needed) and migrate the log at `path`. What is
        written is redacted by `redactor` (default: one for the secrets in `os.environ` now)."""
        if durability not in ("normal", "full"):
            raise UserError(f"unknown durability {durability!r}", hint="use 'normal' or 'full'")
        file = Path(path)
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(
                f"cannot create the folder for the event log {file} ({err.strerror})",
                hint="choose another --db path",
            ) from None
        try:
            # timeout=0: waiting for the lock is `_retry_busy`'s job (see there).
            db = sqlite3.connect(file, timeout=0, isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError as err:
            raise UserError(
                f"cannot open the event log {file} ({err})", hint="check the path and its permissions"
            ) from err
        redactor = Redactor.from_env(os.environ) if redactor is None else redactor
        store = cls(db, file, busy_timeout_s=busy_timeout_s, redactor=redactor)
        try:
            store._refuse_foreign()
            mode = store._retry_busy(lambda: str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0]))
            if mode.lower() != "wal":
                raise UserError(
                    f"cannot use write-ahead logging for the event log {file} (journal mode {mode})",
                    hint="put the store on a local file system",
                )
            db.execute(f"PRAGMA synchronous={durability.upper()}")
            store._retry_busy(lambda: migrate(db, path=str(file)))
        except sqlite3.DatabaseError as err:
            db.close()
            if _is_busy(err):
                raise
            raise UserError(
                f"{file} is not a usable hilbert event log ({err})",
                hint="point hilbert at another store file, or move this one away",
            ) from err
        except BaseException:
            db.close()
            raise
        return store

    @property
    def path(self) -> Path:
        return self._path

    @property
    def redactor(self) -> Redactor:
        """What this store redacts on write; views printing text that is not from the log use it too."""
        return self._redactor

    def _refuse_foreign(self) -> None:
        """Never turn somebody else's SQLite file into an event log (WAL mode, our tables)."""
        # one statement, so one snapshot: another process may be creating the log right now, and its
        # tables and version must not be read from either side of its migration's commit
        query = (
            "SELECT (SELECT user_version FROM pragma_user_version),"
            " (SELECT group_concat(name, char(31)) FROM sqlite_master WHERE type = 'table')"
        )
        version, names = self._retry_busy(lambda: self._db.execute(query).fetchone())
        tables = set(str(names).split("\x1f")) if names else set()
        if (version == 0 and tables) or (version > 0 and "events" not in tables):
            raise UserError(
                f"{self.path} is an SQLite database, but not a hilbert event log",
                hint="point --db at a hilbert event log or at a new file",
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------

    def append(self, run: str, agent: str, kind: str, data: dict[str, Any]) -> Event:
        """Commit one event and return it (its data redacted); it is durable (see the module
        docstring) on return."""
        if not isinstance(data, dict):
            raise TypeError(f"event data must be a dict, not {type(data).__name__}")
        text = json.dumps(self._redactor.redact_json(data), ensure_ascii=False, separators=(",", ":"))

        def insert(db: sqlite3.Connection) -> Event:
            (seq,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE run = ? AND agent = ?", (run, agent)
            ).fetchone()
            now = time.time()
            cursor = db.execute(
                "INSERT INTO events (run, agent, seq, time, kind, data) VALUES (?, ?, ?, ?, ?, ?)",
                (run, agent, seq, now, kind, text),
            )
            assert cursor.lastrowid is not None
            return Event(cursor.lastrowid, run, agent, seq, now, kind, json.loads(text))

        event = self._write(insert)
        if self._observer is not None:
            self._observer(event)
        return event

    def observe(self, observer: Callable[[Event], None] | None) -> None:
        """Call `observer` with every event this instance commits, after the commit (test only:
        `hilbert.fleet.crash`); None stops it."""
        self._observer = observer

    def on_full(self, hook: Callable[[], bool] | None) -> None:
        """Call `hook` whenever a write fails because the disk is full, before trying it again; it
        returns whether to try again (False: the write fails). It runs holding the store's lock: it
        must not use the store. None removes it."""
        self._on_full = hook

    def put_messages(self, messages: Sequence[Message]) -> list[str]:
        """Store each message, redacted, once under its content hash; return the hashes, in order."""
        # a conversation is sent again every turn: each message object is redacted and hashed once
        keys = {id(m): seen[1] for m in messages if (seen := self._stored.get(id(m))) and seen[0] is m}
        fresh = [m for m in messages if id(m) not in keys]
        encoded = [encode_blob(self._redactor.redact_json(m.to_json())) for m in fresh]
        known = self._existing_blobs([key for key, _ in encoded])
        missing = {key: text for key, text in encoded if key not in known}
        if missing:
            self._write(
                lambda db: db.executemany(
                    "INSERT OR IGNORE INTO blobs (hash, data) VALUES (?, ?)", missing.items()
                )
            )
        for message, (key, _) in zip(fresh, encoded, strict=True):
            keys[id(message)] = key
            if len(self._stored) >= _STORED_MEMO:
                del self._stored[next(iter(self._stored))]
            self._stored[id(message)] = (message, key)  # the message is kept: its id cannot be reused
        return [keys[id(m)] for m in messages]

    # -- reading ---------------------------------------------------------------------------------

    def get_messages(self, hashes: Sequence[str]) -> list[Message]:
        """The messages stored under `hashes`, in the same order (repeats allowed)."""
        found: dict[str, Message] = {}
        wanted = list(dict.fromkeys(hashes))
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, text in self._read(f"SELECT hash, data FROM blobs WHERE hash IN ({marks})", chunk):
                found[key] = Message.from_json(json.loads(text))
        missing = [key for key in wanted if key not in found]
        if missing:
            raise RunError(
                f"the event log {self._path} has no message blob {missing[0]} ({len(missing)} missing)",
                hint="the file is damaged or was edited by hand; restore it from a copy",
            )
        return [found[key] for key in hashes]

    def events(
        self,
        *,
        run: str | None = None,
        agent: str | None = None,
        kinds: Iterable[str] | None = None,
        after_id: int = 0,
        upto_id: int | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Events with `after_id < id <= upto_id` matching the filters, oldest first."""
        clauses: list[str] = ["id > ?"]
        params: list[Any] = [after_id]
        for column, value in (("run", run), ("agent", agent)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if kinds is not None:
            wanted = [kinds] if isinstance(kinds, str) else list(kinds)
            if not wanted:
                return []
            clauses.append(f"kind IN ({','.join('?' * len(wanted))})")
            params.extend(wanted)
        if upto_id is not None:
            clauses.append("id <= ?")
            params.append(upto_id)
        sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(clauses)} ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_event(row) for row in self._read(sql, params)]

    def count(self, *, run: str, agent: str, kind: str, upto_id: int | None = None) -> int:
        """How many events of `kind` this agent has, up to `upto_id` (e.g. a model call's number)."""
        sql = "SELECT COUNT(*) FROM events WHERE run = ? AND agent = ? AND kind = ?"
        params: list[Any] = [run, agent, kind]
        if upto_id is not None:
            sql += " AND id <= ?"
            params.append(upto_id)
        return int(self._read(sql, params)[0][0])

    def last_id(self) -> int:
        """The id of the newest event, 0 when the log is empty (follow from here to skip history)."""
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM events", [])[0][0])

    def runs(self) -> list[str]:
        """Run names, in the order they first appear in the log."""
        return [row[0] for row in self._read("SELECT run FROM events GROUP BY run ORDER BY MIN(id)", [])]

    def agents(self, run: str) -> list[str]:
        """The agents of `run`, in the order they first appear in the log."""
        sql = "SELECT agent FROM events WHERE run = ? GROUP BY agent ORDER BY MIN(id)"
        return [row[0] for row in self._read(sql, [run])]

    async def follow(
        self,
        *,
        run: str | None = None,
        agent: str | None = None,
        kinds: Iterable[str] | None = None,
        after_id: int = 0,
        until: Callable[[Event], bool] | None = None,
        poll_s: float = 0.2,
    ) -> AsyncIterator[Event]:
        """Yield matching events with `id > after_id` as they are committed, by any process, polling
        every `poll_s`. Ends after yielding an event for which `until(event)` is true; otherwise runs
        until the consumer stops iterating (or the task is cancelled)."""
        wanted = None if kinds is None else ([kinds] if isinstance(kinds, str) else list(kinds))
        last = after_id
        while True:
            batch = self.events(run=run, agent=agent, kinds=wanted, after_id=last, limit=_CHUNK)
            for event in batch:
                last = event.id
                yield event
                if until is not None and until(event):
                    return
            if len(batch) < _CHUNK:
                await asyncio.sleep(poll_s)

    # -- plumbing --------------------------------------------------------------------------------

    def _existing_blobs(self, hashes: Sequence[str]) -> set[str]:
        unique = list(dict.fromkeys(hashes))
        known: set[str] = set()
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            known.update(
                row[0] for row in self._read(f"SELECT hash FROM blobs WHERE hash IN ({marks})", chunk)
            )
        return known

    def _read(self, sql: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            return self._retry_busy(lambda: self._db.execute(sql, params).fetchall())

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run `body` in one `BEGIN IMMEDIATE` transaction and commit it, retrying while locked."""

        def transaction() -> T:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = body(self._db)
                self._db.execute("COMMIT")
                return result
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

        with self._lock:
            delay = 0.0
            while True:
                try:
                    return self._retry_busy(transaction)
                except sqlite3.OperationalError as err:
                    if not _is_full(err):
                        raise
                    if self._on_full is None or not self._on_full():
                        raise RunError(
                            f"the disk holding the event log {self._path} is full",
                            hint="free some space, then go on with `hilbert run --resume`",
                        ) from err
                time.sleep(delay)  # the first try again at once: the hook may have made room
                delay = min(max(delay * 2, 0.01), _MAX_FULL_WAIT_S)

    def _retry_busy(self, attempt: Callable[[], T]) -> T:
        """Call `attempt` until it does not fail with SQLITE_BUSY/LOCKED, for up to the busy timeout.

        This replaces SQLite's busy handler (the connection has timeout 0): that one sleeps 1, 2, 5,
        … up to 100 ms between tries, so under contention the writer holding the lock keeps winning
        it and the others starve. Short jittered sleeps (at most `_MAX_WAIT_S`) let writers take
        turns; this also covers the BUSY that SQLite returns without calling its handler (WAL
        recovery after a crash)."""
        deadline = time.monotonic() + self._busy_timeout_s
        delay = 0.0005
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as err:
                if not _is_busy(err):
                    raise
                if time.monotonic() >= deadline:
                    raise RunError(
                        f"the event log {self._path} stayed locked for {self._busy_timeout_s:g} s",
                        hint="another process holds a long transaction on it; stop it or use another file",
                    ) from err
                time.sleep(self._jitter.uniform(0, delay))
                delay = min(delay * 2, _MAX_WAIT_S)


def _is_busy(err: sqlite3.DatabaseError) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return "locked" in str(err) or "busy" in str(err)


def _is_full(err: sqlite3.DatabaseError) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == _SQLITE_FULL
    return "disk is full" in str(err)


def _event(row: tuple[Any, ...]) -> Event:
    id_, run, agent, seq, when, kind, data = row
    return Event(id_, run, agent, seq, when, kind, json.loads(data))
