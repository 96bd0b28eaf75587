"""The local job store: one SQLite file (`$AIPTRAIN_HOME/jobs.db`) shared by every process.

The CLI, the emulator and every job's supervisor open the same file, so everything that must
not race happens inside `BEGIN IMMEDIATE` transactions: job-ID uniqueness is a UNIQUE
constraint, slot acquisition counts and claims in one transaction, and log inserts clamp their
timestamps there so `(timestamp, insert_id)` grows in commit order (a reader holding a cursor
can never miss a line committed later with an earlier timestamp). WAL mode lets readers follow
logs while supervisors write.

Every query a listing or a describe runs is an index lookup; nothing reads per-job logs or
scans the whole table, so 10,000 stored jobs cost the same as ten.

The store is one class built from its sections, each in a module of its own: `store_connection`
(connections and write transactions), `store_schema` (tables and migrations), `store_records`
(the rows it hands out), `store_jobs`, `store_slots` and `store_logs`; the replicas and
retention sections, and the opening of the file, are here.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from aiptrain._backends.local.store_errors import store_failure
from aiptrain._backends.local.store_integrity import UsersLock, check, needs_check
from aiptrain._backends.local.store_jobs import JobQueries
from aiptrain._backends.local.store_logs import JobLogEntry, LogQueries, PendingLine, insert_id_for
from aiptrain._backends.local.store_records import (
    TERMINAL_VALUES,
    JobRecord,
    JobSnapshot,
    ReplicaRecord,
    StateChange,
    job_record,
)
from aiptrain._backends.local.store_schema import ensure_schema
from aiptrain._backends.local.store_slots import SlotClaim, SlotQueue
from aiptrain._paths import HomeLayout
from aiptrain._replicas.clock import job_time

# What callers import from here, wherever its section defines it.
__all__ = [
    "JobLogEntry",
    "JobRecord",
    "JobSnapshot",
    "JobStore",
    "PendingLine",
    "ReplicaRecord",
    "SlotClaim",
    "StateChange",
    "insert_id_for",
]


def _check_if_left_uncleanly(database: Path, users: UsersLock) -> None:
    """quick_check when this is the store's only user and it was not left cleanly (store_integrity)."""
    try:
        if users.try_exclusive() and needs_check(database):
            check(database)
    finally:
        users.share()


def _side_files(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _create_private(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it: SQLite gives its -wal and -shm files
    the database's mode, so no file of the store is ever readable by others, whatever the umask.

    Only a file that does not exist yet is opened here: closing any descriptor of a file drops
    every POSIX lock this process holds on it, SQLite's included (another JobStore of this process
    may be using the store), so an existing store is never opened outside SQLite.
    """
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(descriptor)


class JobStore(JobQueries, SlotQueue, LogQueries):
    """Typed access to jobs.db. Safe to share between threads (one connection per thread)."""

    def __init__(self, home: Path) -> None:
        super().__init__(HomeLayout(home).jobs_db)
        self.home = home
        try:
            home.mkdir(parents=True, exist_ok=True)
            home.chmod(0o700)
            _create_private(self.path)
            users = UsersLock(self.path)
            self._handles.users = users
            _check_if_left_uncleanly(self.path, users)
            ensure_schema(self)
            for path in (self.path, *_side_files(self.path)):
                # Stores made by older versions; a side file may vanish meanwhile (its last user closed).
                with contextlib.suppress(FileNotFoundError):
                    path.chmod(0o600)
        except (OSError, sqlite3.Error) as error:
            self.close()
            raise store_failure(error, self.path) from None
        except BaseException:
            self.close()
            raise

    # -- replicas -----------------------------------------------------------------------------

    def replica_started(
        self, key: int, trial_id: str | None, task_name: str, pid: int, pgid: int, start_ticks: int | None,
        restarts: int,
    ) -> None:
        with self._write() as tx:
            tx.execute(
                "INSERT INTO replicas (job_key, trial_id, task_name, pid, pgid, start_ticks, restarts,"
                " started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (job_key, trial_id, task_name) DO UPDATE SET pid = excluded.pid,"
                " pgid = excluded.pgid, start_ticks = excluded.start_ticks, restarts = excluded.restarts,"
                " started_at = excluded.started_at, exit_code = NULL, signal = NULL, ended_at = NULL",
                (key, trial_id or "", task_name, pid, pgid, start_ticks, restarts, job_time()),
            )

    def replica_exited(self, key: int, trial_id: str | None, task_name: str, returncode: int) -> None:
        exit_code, signal = (None, -returncode) if returncode < 0 else (returncode, None)
        with self._write() as tx:
            tx.execute(
                "UPDATE replicas SET exit_code = ?, signal = ?, ended_at = ?"
                " WHERE job_key = ? AND trial_id = ? AND task_name = ?",
                (exit_code, signal, job_time(), key, trial_id or "", task_name),
            )

    def replicas(self, key: int) -> list[ReplicaRecord]:
        rows = self._read("SELECT * FROM replicas WHERE job_key = ? ORDER BY rowid", (key,))
        return [
            ReplicaRecord(
                trial_id=row["trial_id"],
                task_name=row["task_name"],
                pid=row["pid"],
                pgid=row["pgid"],
                start_ticks=row["start_ticks"],
                restarts=row["restarts"],
                exit_code=row["exit_code"],
                signal=row["signal"],
            )
            for row in rows
        ]

    # -- retention ----------------------------------------------------------------------------

    def finished_jobs(self) -> list[JobRecord]:
        """Every job in a terminal state, on any project, oldest first."""
        marks = ",".join("?" * len(TERMINAL_VALUES))
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY key", TERMINAL_VALUES)  # noqa: S608
        return [job_record(row) for row in rows]

    def log_bytes(self, key: int) -> int:
        """The bytes of the job's log messages (what deleting its log frees, roughly)."""
        row = self.connection().execute("SELECT COALESCE(SUM(LENGTH(message)), 0) FROM logs WHERE job_key = ?",
                                        (key,)).fetchone()
        return int(row[0])

    def delete_finished(self, keys: Sequence[int]) -> list[int]:
        """Delete these jobs with their logs, replicas and history, each only if it is finished
        (checked in the same transaction: a job that is running is never touched); the deleted keys."""
        deleted: list[int] = []
        marks = ",".join("?" * len(TERMINAL_VALUES))
        with self._write() as tx:
            for key in keys:
                row = tx.execute(f"SELECT 1 FROM jobs WHERE key = ? AND state IN ({marks})",  # noqa: S608
                                 (key, *TERMINAL_VALUES)).fetchone()
                if row is None:
                    continue
                for table, column in (("logs", "job_key"), ("replicas", "job_key"), ("state_history", "job_key"),
                                      ("jobs", "key")):
                    tx.execute(f"DELETE FROM {table} WHERE {column} = ?", (key,))  # noqa: S608
                deleted.append(key)
        return deleted

    def compact(self) -> None:
        """Give the space of deleted rows back to the file system: VACUUM, then fold the
        write-ahead log into the file and truncate it."""
        conn = self.connection()
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def file_bytes(self) -> int:
        """The store's size on disk, its write-ahead log included."""
        total = 0
        for path in (self.path, *_side_files(self.path)):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total
