"""The local job store's schema, and the migrations that bring a store made by an older version to it.

A store already at this schema (its `user_version` is the schema's checksum) is opened without
taking the write lock; any other is brought up to date in one write transaction, by one connection
at a time (`store-schema.lock`): a brand-new store is still in SQLite's rollback-journal mode,
where two connections switching it to WAL at once can deadlock on its locks, and SQLite then
answers one of them "database is locked" at once instead of waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiptrain._backends.local.store_connection import StoreConnection, Transaction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    job_id TEXT NOT NULL,
    state TEXT NOT NULL,
    resource TEXT NOT NULL,
    holds_slot INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    supervisor_pid INTEGER,
    supervisor_start_ticks INTEGER,
    run_token TEXT NOT NULL,
    created_epoch REAL NOT NULL,
    vertex_job_id TEXT,
    runtime_environment TEXT,
    machine_share TEXT,
    runs_containers INTEGER,
    runner TEXT,
    runner_job TEXT,
    runner_log_cursor TEXT,
    UNIQUE (project, job_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_project ON jobs (project, key);
CREATE INDEX IF NOT EXISTS jobs_by_project_state ON jobs (project, state, key);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, holds_slot, key);
CREATE INDEX IF NOT EXISTS jobs_holding_slot ON jobs (holds_slot) WHERE holds_slot = 1;

CREATE TABLE IF NOT EXISTS state_history (
    job_key INTEGER NOT NULL REFERENCES jobs (key),
    state TEXT NOT NULL,
    at TEXT NOT NULL,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS state_history_by_job ON state_history (job_key);

CREATE TABLE IF NOT EXISTS replicas (
    job_key INTEGER NOT NULL REFERENCES jobs (key),
    trial_id TEXT NOT NULL DEFAULT '',
    task_name TEXT NOT NULL,
    pid INTEGER,
    pgid INTEGER,
    start_ticks INTEGER,
    restarts INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    signal INTEGER,
    started_at TEXT,
    ended_at TEXT,
    PRIMARY KEY (job_key, trial_id, task_name)
);

CREATE TABLE IF NOT EXISTS logs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    job_key INTEGER NOT NULL REFERENCES jobs (key),
    timestamp TEXT NOT NULL,
    severity TEXT NOT NULL,
    task_name TEXT NOT NULL,
    trial_id TEXT,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_cursor ON logs (job_key, timestamp, seq);
CREATE INDEX IF NOT EXISTS logs_by_time ON logs (timestamp, seq);

CREATE TABLE IF NOT EXISTS machine_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


def ensure_schema(store: StoreConnection) -> None:
    """Create the tables of a new store, or add what an older store lacks."""
    conn = store.connection()
    # Readers never wait for a writer: a store already at this schema is opened without
    # taking the write lock, so a long transaction elsewhere does not block `jobs list`.
    version = zlib.crc32(_SCHEMA.encode()) & 0x7FFFFFFF
    if conn.execute("PRAGMA user_version").fetchone()[0] == version:
        return
    with _one_at_a_time(store.path):
        if conn.execute("PRAGMA user_version").fetchone()[0] == version:
            return  # brought up to date by another connection meanwhile
        conn.execute("PRAGMA journal_mode=WAL")
        with store._write() as tx:
            tx.executescript_in_tx(_SCHEMA)
            _add_missing_columns(tx)
            tx.execute(f"PRAGMA user_version = {version}")


@contextlib.contextmanager
def _one_at_a_time(database: Path) -> Iterator[None]:
    """An exclusive `flock` on `store-schema.lock` beside the database, per open file, so it holds
    between threads of one process as between processes. Not named jobs.db*: an open file of
    that name keeps supervisors from being forked."""
    descriptor = os.open(database.with_name("store-schema.lock"), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


# Columns added after the first release of the schema: (table, column, definition). A store made
# before one of them gets it on its next open (CREATE TABLE IF NOT EXISTS leaves its table as is).
_ADDED_COLUMNS = (("jobs", "vertex_job_id", "TEXT"), ("jobs", "runtime_environment", "TEXT"),
                  ("jobs", "machine_share", "TEXT"), ("jobs", "runs_containers", "INTEGER"),
                  ("jobs", "runner", "TEXT"), ("jobs", "runner_job", "TEXT"), ("jobs", "runner_log_cursor", "TEXT"))


def _add_missing_columns(tx: Transaction) -> None:
    for table, column, definition in _ADDED_COLUMNS:
        present = {row[1] for row in tx.execute(f"PRAGMA table_info({table})").fetchall()}
        if column not in present:
            tx.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
