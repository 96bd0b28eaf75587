"""The local job store's plumbing: one SQLite connection per thread, write transactions that hold
the write lock from their first statement, and the close that stamps a clean shutdown.

Each section of the store (`store_jobs`, `store_slots`, `store_logs`, `store`) builds on
`StoreConnection`; none of them opens a connection of its own.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from aiptrain._backends.local.store_integrity import UsersLock, record_clean_close

BUSY_TIMEOUT_MS = 30_000


class _Handles:
    """What an open store holds: its connections (one per thread) and its share of the users lock.

    Kept apart from the JobStore so that a finalizer can close them when the store is dropped
    without `close()` or when the process exits: the clean-close stamp is written while they are
    still open, by whichever way the store ends.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.users: UsersLock | None = None
        self.connections: list[sqlite3.Connection] = []
        # Bumped by every close: a thread's connection from before it is closed and must be reopened.
        self.generation = 0
        self.guard = threading.Lock()

    def join(self) -> None:
        """Hold a share of the users lock again (after a close that released it)."""
        with self.guard:
            if self.users is None:
                self.users = UsersLock(self.path)
                self.users.share()

    def add(self, conn: sqlite3.Connection) -> None:
        with self.guard:
            self.connections.append(conn)

    def close(self) -> None:
        with self.guard:
            connections, self.connections = self.connections, []
            users, self.users = self.users, None
            self.generation += 1
        for conn in connections:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        if users is not None:
            if users.try_exclusive():  # the last user: its close checkpointed the log
                record_clean_close(self.path)
            users.close()


class StoreConnection:
    """The connections of one store file. Safe to share between threads (one connection per thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._handles = _Handles(self.path)
        # A store dropped without close(), or still open when the process exits, is closed cleanly.
        self._finalizer = weakref.finalize(self, self._handles.close)

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "generation", -1) != self._handles.generation:
            self._handles.join()
            # Not bound to its thread only so that the close of the store can close it too.
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._handles.add(conn)
            self._local.conn = conn
            self._local.generation = self._handles.generation
        return conn

    @contextmanager
    def _write(self) -> Iterator[Transaction]:
        """A write transaction that holds the database's write lock from its first statement."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield Transaction(conn)
            conn.execute("COMMIT")
        except BaseException:
            # A COMMIT that failed (a full disk) leaves the transaction open: the connection must not
            # carry it, and its write lock, into the next one.
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _read(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        return self.connection().execute(sql, params).fetchall()

    def close(self) -> None:
        """Close every connection and, as the store's last user, stamp its clean close; the next
        query reopens it."""
        self._handles.close()
        self._local.conn = None


class Transaction:
    """The cursor-like handle a write transaction hands out."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        self._conn.executemany(sql, rows)

    def executescript_in_tx(self, script: str) -> None:
        # executescript() would COMMIT first; run the statements one by one inside the transaction.
        for statement in script.split(";"):
            if statement.strip():
                self._conn.execute(statement)
