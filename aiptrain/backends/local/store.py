"""The local job store: one SQLite file (`$AIPTRAIN_HOME/jobs.db`) shared by every process.

The CLI, the emulator and every job's supervisor open the same file, so everything that must
not race happens inside `BEGIN IMMEDIATE` transactions: job-ID uniqueness is a UNIQUE
constraint, slot acquisition counts and claims in one transaction, and log inserts clamp their
timestamps there so `(timestamp, insert_id)` grows in commit order (a reader holding a cursor
can never miss a line committed later with an earlier timestamp). WAL mode lets readers follow
logs while supervisors write.

Every query a listing or a describe runs is an index lookup; nothing reads per-job logs or
scans the whole table, so 10,000 stored jobs cost the same as ten.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
import weakref
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain.backends.local.store_errors import store_failure
from aiptrain.backends.local.store_integrity import UsersLock, check, needs_check, record_clean_close
from aiptrain.errors import AlreadyExists, NotFound
from aiptrain.job.logs import LogCursor, LogEntry
from aiptrain.job.state import TERMINAL_STATES, JobState
from aiptrain.replicas.clock import job_time, log_time, parse_log_time

if TYPE_CHECKING:
    from aiptrain.job.spec import Job

DB_NAME = "jobs.db"
BUSY_TIMEOUT_MS = 30_000
# Zero-padded so that text order and numeric order of insert ids agree.
INSERT_ID_WIDTH = 20

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

ACTIVE_JOB_STATES = frozenset(state for state in JobState if state not in TERMINAL_STATES)
ACTIVE_STATES = tuple(sorted(state.value for state in ACTIVE_JOB_STATES))
TERMINAL_VALUES = tuple(sorted(state.value for state in TERMINAL_STATES))


@dataclass(frozen=True)
class JobRecord:
    """A stored job: its resource plus what the engine keeps about running it."""

    key: int
    project: str
    job_id: str
    state: JobState
    job: Job
    holds_slot: bool
    cancel_requested: bool
    supervisor_pid: int | None
    supervisor_start_ticks: int | None
    run_token: str
    created_epoch: float
    # The numeric ID of the Vertex AI job this job runs (the emulator's customJobs), else None.
    vertex_job_id: str | None = None
    # What the job ran in, recorded when it was prepared (`set_runtime_environment`), else None.
    runtime_environment: dict[str, Any] | None = None
    # Its part of the machine (cores, GPUs), claimed with its run slot (`try_acquire_slot`), else None.
    machine_share: dict[str, Any] | None = None


@dataclass(frozen=True)
class JobSnapshot:
    """A stored job without its model: what a command that only waits for its end reads."""

    key: int
    state: JobState
    resource: dict[str, Any]  # the REST representation, as stored
    supervisor_pid: int | None
    supervisor_start_ticks: int | None
    created_epoch: float
    holds_slot: bool


@dataclass(frozen=True)
class ReplicaRecord:
    trial_id: str
    task_name: str
    pid: int | None
    pgid: int | None
    start_ticks: int | None
    restarts: int
    exit_code: int | None
    signal: int | None


@dataclass(frozen=True)
class StateChange:
    state: JobState
    at: str
    detail: str | None


@dataclass(frozen=True)
class PendingLine:
    """A captured line waiting to be stored; the store assigns its final timestamp and id."""

    captured: datetime
    severity: str
    task_name: str
    message: str
    trial_id: str | None = None


# (the machine shares of the jobs holding a slot) -> this job's, or None when it must wait.
SlotClaim = Callable[[list[dict[str, Any]]], "dict[str, Any] | None"]


def insert_id_for(seq: int) -> str:
    return str(seq).zfill(INSERT_ID_WIDTH)


def _etag(resource: str) -> str:
    return base64.b64encode(hashlib.sha256(resource.encode()).digest()[:8]).decode()


def _dump(job: Job) -> str:
    job.etag = None
    text = json.dumps(job.to_api(), sort_keys=True)
    job.etag = _etag(text)
    return json.dumps(job.to_api(), sort_keys=True)


def _check_if_left_uncleanly(database: Path, users: UsersLock) -> None:
    """quick_check when this is the store's only user and it was not left cleanly (store_integrity)."""
    try:
        if users.try_exclusive() and needs_check(database):
            check(database)
    finally:
        users.share()


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


class JobStore:
    """Typed access to jobs.db. Safe to share between threads (one connection per thread)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / DB_NAME
        self._local = threading.local()
        self._handles = _Handles(self.path)
        # A store dropped without close(), or still open when the process exits, is closed cleanly.
        self._finalizer = weakref.finalize(self, self._handles.close)
        try:
            home.mkdir(parents=True, exist_ok=True)
            home.chmod(0o700)
            _create_private(self.path)
            users = UsersLock(self.path)
            self._handles.users = users
            _check_if_left_uncleanly(self.path, users)
            conn = self.connection()
            # Readers never wait for a writer: a store already at this schema is opened without
            # taking the write lock, so a long transaction elsewhere does not block `jobs list`.
            version = zlib.crc32(_SCHEMA.encode()) & 0x7FFFFFFF
            if conn.execute("PRAGMA user_version").fetchone()[0] != version:
                conn.execute("PRAGMA journal_mode=WAL")
                with self._write() as tx:
                    tx.executescript_in_tx(_SCHEMA)
                    _add_missing_columns(tx)
                    tx.execute(f"PRAGMA user_version = {version}")
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

    # -- plumbing -----------------------------------------------------------------------------

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
    def _write(self) -> Iterator[_Tx]:
        """A write transaction that holds the database's write lock from its first statement."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _Tx(conn)
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

    # -- jobs ---------------------------------------------------------------------------------

    def insert_job(self, project: str, job: Job, run_token: str, *, vertex_job_id: str | None = None) -> JobRecord:
        """Store a new job as QUEUED; AlreadyExists if the project already has this job ID.

        `vertex_job_id`: the numeric ID of the Vertex AI job it runs, for jobs the emulator took in
        as Vertex jobs (their replicas run the way Vertex ran them).
        """
        assert job.job_id
        job.state = JobState.QUEUED
        job.create_time = job_time()
        try:
            with self._write() as tx:
                cursor = tx.execute(
                    "INSERT INTO jobs (project, job_id, state, resource, run_token, created_epoch, vertex_job_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (project, job.job_id, JobState.QUEUED.value, _dump(job), run_token, time.time(), vertex_job_id),
                )
                key = int(cursor.lastrowid or 0)
                tx.execute(
                    "INSERT INTO state_history (job_key, state, at) VALUES (?, ?, ?)",
                    (key, JobState.QUEUED.value, job.create_time),
                )
        except sqlite3.IntegrityError:
            raise AlreadyExists(
                f"a job with ID {job.job_id!r} already exists in project {project!r}",
                hint="job IDs are unique per project; submit again with another job ID (the first argument)",
            ) from None
        return self.get_by_key(key)

    def get(self, project: str, job_id: str) -> JobRecord:
        return _record(self._one_job(project, job_id))

    def peek(self, project: str, job_id: str) -> JobSnapshot:
        """The job's state and stored resource without its model (no pydantic); NotFound."""
        row = self._one_job(project, job_id)
        return JobSnapshot(key=row["key"], state=JobState(row["state"]), resource=json.loads(row["resource"]),
                           supervisor_pid=row["supervisor_pid"], supervisor_start_ticks=row["supervisor_start_ticks"],
                           created_epoch=row["created_epoch"], holds_slot=bool(row["holds_slot"]))

    def vertex_job_ids(self, project: str) -> dict[str, str]:
        """Job ID -> the numeric ID of the Vertex AI job it runs, for the project's Vertex jobs."""
        rows = self._read("SELECT job_id, vertex_job_id FROM jobs WHERE project = ? AND vertex_job_id IS NOT NULL",
                          (project,))
        return {row["job_id"]: row["vertex_job_id"] for row in rows}

    def projects(self) -> list[str]:
        """Every project that has a stored job, in name order (an index scan: one row per project)."""
        return [row["project"] for row in self._read("SELECT DISTINCT project FROM jobs ORDER BY project")]

    def _one_job(self, project: str, job_id: str) -> sqlite3.Row:
        rows = self._read("SELECT * FROM jobs WHERE project = ? AND job_id = ?", (project, job_id))
        if not rows:
            raise NotFound(
                f"job {job_id!r} not found in project {project!r}",
                hint="`aiptrain jobs list` shows the jobs of a project",
            )
        return rows[0]

    def has_unlaunched(self) -> bool:
        """True if some job is QUEUED without a supervisor (one `launch` may have to start)."""
        row = self.connection().execute(
            "SELECT 1 FROM jobs WHERE state = ? AND supervisor_pid IS NULL LIMIT 1", (JobState.QUEUED.value,)
        ).fetchone()
        return row is not None

    def unlaunched(self, limit: int) -> list[JobRecord]:
        """The oldest QUEUED jobs without a supervisor, first come first, at most `limit`."""
        rows = self._read("SELECT * FROM jobs WHERE state = ? AND supervisor_pid IS NULL ORDER BY key LIMIT ?",
                          (JobState.QUEUED.value, limit))
        return [_record(row) for row in rows]

    def launch_room(self, default_limit: int) -> int:
        """How many more supervisors may start: the machine's limit (`max_running`) less the jobs
        holding a slot and the queued ones whose supervisor waits for one."""
        execute = self.connection().execute
        limit = _stored_max_running(execute, default_limit)
        taken = execute(
            "SELECT COUNT(*) FROM jobs WHERE holds_slot = 1"
            " OR (state = ? AND supervisor_pid IS NOT NULL)", (JobState.QUEUED.value,)).fetchone()[0]
        return max(0, limit - int(taken))

    def supervised_jobs(self) -> list[JobRecord]:
        """Unfinished jobs that have (or should have) a supervisor: all but those queued without one."""
        marks = ",".join("?" * len(ACTIVE_STATES))
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks})"  # noqa: S608
                          " AND NOT (state = ? AND supervisor_pid IS NULL) ORDER BY key",
                          (*ACTIVE_STATES, JobState.QUEUED.value))
        return [_record(row) for row in rows]

    def get_by_key(self, key: int) -> JobRecord:
        rows = self._read("SELECT * FROM jobs WHERE key = ?", (key,))
        if not rows:
            raise NotFound(f"no stored job with key {key}")
        return _record(rows[0])

    def list_jobs(
        self,
        project: str,
        *,
        limit: int,
        before_key: int | None = None,
        where: str = "",
        params: Sequence[object] = (),
        vertex: bool | None = None,
    ) -> list[JobRecord]:
        """Newest first. `where` is an extra SQL condition over the jobs columns (from `filters`);
        `vertex` keeps only the jobs that run Vertex AI jobs (True) or only the others (False)."""
        sql = "SELECT * FROM jobs WHERE project = ?"
        args: list[object] = [project]
        if vertex is not None:
            sql += " AND vertex_job_id IS NOT NULL" if vertex else " AND vertex_job_id IS NULL"
        if before_key is not None:
            sql += " AND key < ?"
            args.append(before_key)
        if where:
            sql += f" AND ({where})"
            args.extend(params)
        sql += " ORDER BY key DESC LIMIT ?"
        args.append(limit)
        return [_record(row) for row in self._read(sql, args)]

    def active_jobs(self) -> list[JobRecord]:
        """Jobs not in a terminal state, on any project (few: they are running or waiting)."""
        marks = ",".join("?" * len(ACTIVE_STATES))  # placeholders only; values are bound
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY key", ACTIVE_STATES)  # noqa: S608
        return [_record(row) for row in rows]

    def set_runtime_environment(self, key: int, environment: dict[str, Any]) -> None:
        """Record what the job runs in (its interpreter, TensorFlow, packages, the notes said)."""
        with self._write() as tx:
            tx.execute("UPDATE jobs SET runtime_environment = ? WHERE key = ?", (json.dumps(environment), key))

    def set_supervisor(self, key: int, pid: int, start_ticks: int | None) -> None:
        with self._write() as tx:
            tx.execute(
                "UPDATE jobs SET supervisor_pid = ?, supervisor_start_ticks = ? WHERE key = ?",
                (pid, start_ticks, key),
            )

    def transition(
        self,
        key: int,
        state: JobState,
        *,
        allowed_from: frozenset[JobState] | None = None,
        error_message: str | None = None,
        detail: str | None = None,
        still_applies: Callable[[JobRecord], bool] | None = None,
        lines: Sequence[PendingLine] = (),
    ) -> JobRecord | None:
        """Move a job to `state` and record it; None when its current state does not allow it.

        `lines` are logged in the same transaction, only if the move happens: a follower that
        sees the final state has already been able to read the final lines.

        `allowed_from` defaults to every non-terminal state: a finished job never changes again.
        `still_applies`, if given, is asked inside the write lock whether the move still applies
        (used to fail a job only if its supervisor is really gone at that instant).
        Entering PREPARING sets startTime; a terminal state sets endTime and frees the slot.
        """
        with self._write() as tx:
            changed = _transition_in_tx(tx, key, state, allowed_from, error_message, detail, still_applies)
            if changed:
                _append_logs_in_tx(tx, key, lines)
        return self.get_by_key(key) if changed else None

    def update_resource(self, key: int, mutate: Callable[[Job], None]) -> JobRecord:
        """Change service-filled fields (trainingOutput, ...) of the stored resource atomically."""
        with self._write() as tx:
            rows = tx.execute("SELECT * FROM jobs WHERE key = ?", (key,)).fetchall()
            if not rows:
                raise NotFound(f"no stored job with key {key}")
            job = _record(rows[0]).job
            mutate(job)
            tx.execute("UPDATE jobs SET resource = ? WHERE key = ?", (_dump(job), key))
        return self.get_by_key(key)

    def request_cancel(self, key: int) -> JobRecord:
        """Flag the job for cancellation and show CANCELLING; a no-op on a finished job."""
        with self._write() as tx:
            changed = _transition_in_tx(
                tx,
                key,
                JobState.CANCELLING,
                frozenset({JobState.QUEUED, JobState.PREPARING, JobState.RUNNING}),
                None,
                "cancel requested",
                None,
            )
            if changed:
                tx.execute("UPDATE jobs SET cancel_requested = 1 WHERE key = ?", (key,))
        return self.get_by_key(key)

    def cancel_requested(self, key: int) -> bool:
        row = self.connection().execute("SELECT cancel_requested FROM jobs WHERE key = ?", (key,)).fetchone()
        return bool(row and row[0])

    def state_history(self, key: int) -> list[StateChange]:
        rows = self._read(
            "SELECT state, at, detail FROM state_history WHERE job_key = ? ORDER BY rowid", (key,)
        )
        return [StateChange(JobState(row["state"]), row["at"], row["detail"]) for row in rows]

    # -- retention ----------------------------------------------------------------------------

    def finished_jobs(self) -> list[JobRecord]:
        """Every job in a terminal state, on any project, oldest first."""
        marks = ",".join("?" * len(TERMINAL_VALUES))
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY key", TERMINAL_VALUES)  # noqa: S608
        return [_record(row) for row in rows]

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

    # -- slots --------------------------------------------------------------------------------

    def try_acquire_slot(self, key: int, limit: int, claim: SlotClaim | None = None) -> bool:
        """Claim a run slot if fewer than the machine's limit (`max_running`; `limit` when none was
        set) jobs hold one and this job is next in line. One limit for every job keeps the queue
        first come, first served whatever each submitter's setting was.

        First come, first served: a job takes a slot only if every waiting job created before it
        could take one too. Count and claim share one IMMEDIATE transaction, so two supervisors
        can never both take the last slot.

        `claim`, if given, is asked inside that transaction for the job's part of the machine,
        given the parts the jobs holding a slot hold (their `machine_share`); it returns the part
        to record with the slot, or None when what the job needs is held by others (it waits, and
        so do the jobs behind it). The slot and the devices are taken and freed together.
        """
        if not self._slot_looks_free(key, limit, claim):
            return False  # a read is enough to say no; only a likely yes takes the write lock
        with self._write() as tx:
            row = tx.execute("SELECT state, holds_slot FROM jobs WHERE key = ?", (key,)).fetchone()
            if row is None or row["state"] != JobState.QUEUED.value:
                return False
            if row["holds_slot"]:
                return True
            if not self._slot_free_in(tx.execute, key, limit):
                return False
            share = claim(_held_shares(tx.execute)) if claim is not None else None
            if claim is not None and share is None:
                return False
            resource = tx.execute("SELECT resource FROM jobs WHERE key = ?", (key,)).fetchone()[0]
            job = _job(resource)
            job.job_position = 0
            tx.execute("UPDATE jobs SET holds_slot = 1, resource = ?, machine_share = ? WHERE key = ?",
                       (_dump(job), json.dumps(share) if share is not None else None, key))
        return True

    def _slot_looks_free(self, key: int, limit: int, claim: SlotClaim | None) -> bool:
        execute = self.connection().execute
        if not self._slot_free_in(execute, key, limit):
            return False
        return claim is None or claim(_held_shares(execute)) is not None

    def set_max_running(self, limit: int) -> None:
        """Make `limit` the machine's limit on jobs holding a run slot, for every job (queued ones too)."""
        with self._write() as tx:
            tx.execute("INSERT INTO machine_settings (name, value) VALUES ('max_running', ?)"
                       " ON CONFLICT (name) DO UPDATE SET value = excluded.value", (str(limit),))

    def max_running(self, default: int) -> int:
        """The machine's limit on running jobs: the one last set (`set_max_running`), else `default`."""
        return _stored_max_running(self.connection().execute, default)

    @staticmethod
    def _slot_free_in(execute: Callable[..., Any], key: int, limit: int) -> bool:
        limit = _stored_max_running(execute, limit)
        running = execute("SELECT COUNT(*) FROM jobs WHERE holds_slot = 1").fetchone()[0]
        ahead = execute(
            "SELECT COUNT(*) FROM jobs WHERE state = ? AND holds_slot = 0 AND key < ?",
            (JobState.QUEUED.value, key),
        ).fetchone()[0]
        return int(running) + int(ahead) < limit

    def queue_position(self, key: int) -> int:
        """1 + the number of jobs waiting for a slot ahead of this one (it must be waiting too)."""
        row = self.connection().execute(
            "SELECT COUNT(*) FROM jobs WHERE state = ? AND holds_slot = 0 AND key < ?",
            (JobState.QUEUED.value, key),
        ).fetchone()
        return int(row[0]) + 1

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

    # -- logs ---------------------------------------------------------------------------------

    def append_logs(self, key: int, lines: Sequence[PendingLine]) -> None:
        """Store lines in capture order, each stamped no earlier than the job's latest line."""
        if not lines:
            return
        with self._write() as tx:
            _append_logs_in_tx(tx, key, lines)

    def read_logs(
        self, key: int, *, after: LogCursor | None = None, task_name: str | None = None, limit: int = 1000
    ) -> list[LogEntry]:
        """Entries strictly after `after` in (timestamp, insert_id) order, at most `limit`."""
        where, args = _job_log_condition(key, after, task_name)
        sql = f"SELECT seq, timestamp, severity, task_name, trial_id, message FROM logs WHERE {where}"  # noqa: S608
        sql += " ORDER BY timestamp, seq LIMIT ?"
        return [_log_entry(row) for row in self._read(sql, [*args, limit])]

    def tail_cursor(
        self, key: int, count: int, *, after: LogCursor | None = None, task_name: str | None = None
    ) -> LogCursor | None:
        """The cursor the last `count` entries after `after` follow (`after` itself when there are
        fewer): one seek from the newest end of the index, whatever the log's length."""
        where, args = _job_log_condition(key, after, task_name)
        sql = f"SELECT seq, timestamp FROM logs WHERE {where}"  # noqa: S608
        rows = self._read(sql + " ORDER BY timestamp DESC, seq DESC LIMIT 1 OFFSET ?", [*args, count])
        if not rows:
            return after
        return LogCursor(parse_log_time(rows[0]["timestamp"]), insert_id_for(rows[0]["seq"]))

    def read_project_logs(
        self, project: str, *, job_ids: Sequence[str] | None = None, after: LogCursor | None = None,
        descending: bool = False, not_before: datetime | None = None, limit: int = 1000,
    ) -> list[JobLogEntry]:
        """Entries of the project's jobs (only `job_ids` when given) strictly after `after` in
        (timestamp, insert_id) order, or strictly before it when `descending`; none earlier than
        `not_before`; at most `limit`.

        Keyset pagination over an index, so the newest page costs what the oldest does: one job's
        lines are read through `logs_by_cursor`, several jobs' through `logs_by_time`.
        """
        columns = "l.seq, l.timestamp, l.severity, l.task_name, l.trial_id, l.message, j.job_id, j.vertex_job_id"
        sql = f"SELECT {columns} FROM logs l JOIN jobs j ON j.key = l.job_key WHERE "  # noqa: S608
        args: list[object] = []
        if job_ids is not None and len(job_ids) == 1:
            row = self.connection().execute("SELECT key FROM jobs WHERE project = ? AND job_id = ?",
                                            (project, job_ids[0])).fetchone()
            if row is None:
                return []
            sql += "l.job_key = ?"
            args.append(row[0])
        else:
            sql += "j.project = ?"
            args.append(project)
            if job_ids is not None:
                if not job_ids:
                    return []
                sql += f" AND j.job_id IN ({','.join('?' * len(job_ids))})"
                args.extend(job_ids)
        if after is not None:
            stamp = log_time(after.timestamp)
            seq = int(after.insert_id) if after.insert_id.isdigit() else (0 if not descending else 1 << 62)
            sql += f" AND (l.timestamp, l.seq) {'<' if descending else '>'} (?, ?)"
            args += [stamp, seq]
        if not_before is not None:
            sql += " AND l.timestamp >= ?"
            args.append(log_time(not_before))
        order = "DESC" if descending else "ASC"
        sql += f" ORDER BY l.timestamp {order}, l.seq {order} LIMIT ?"
        args.append(limit)
        return [JobLogEntry(row["job_id"], row["vertex_job_id"], _log_entry(row)) for row in self._read(sql, args)]


@dataclass(frozen=True)
class JobLogEntry:
    """A log entry with the job it belongs to (its ID, and the Vertex AI job's numeric ID if any)."""

    job_id: str
    vertex_job_id: str | None
    entry: LogEntry


def _log_entry(row: sqlite3.Row) -> LogEntry:
    return LogEntry(
        timestamp=parse_log_time(row["timestamp"]),
        insert_id=insert_id_for(row["seq"]),
        severity=row["severity"],
        task_name=row["task_name"],
        message=row["message"],
        trial_id=row["trial_id"],
    )


def _job_log_condition(key: int, after: LogCursor | None, task_name: str | None) -> tuple[str, list[object]]:
    """The WHERE clause (and its arguments) of a job's entries strictly after `after`."""
    sql = "job_key = ?"
    args: list[object] = [key]
    if after is not None:
        stamp = log_time(after.timestamp)
        if after.insert_id.isdigit():
            sql += " AND (timestamp, seq) > (?, ?)"
            args += [stamp, int(after.insert_id)]
        else:
            sql += " AND timestamp > ?"
            args.append(stamp)
    if task_name is not None:
        sql += " AND task_name = ?"
        args.append(task_name)
    return sql, args


def _stored_max_running(execute: Callable[..., Any], default: int) -> int:
    row = execute("SELECT value FROM machine_settings WHERE name = 'max_running'").fetchone()
    return int(row[0]) if row is not None else default


def _held_shares(execute: Callable[..., Any]) -> list[dict[str, Any]]:
    rows = execute("SELECT machine_share FROM jobs WHERE holds_slot = 1 AND machine_share IS NOT NULL").fetchall()
    return [json.loads(row[0]) for row in rows]


class _Tx:
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


def _append_logs_in_tx(tx: _Tx, key: int, lines: Sequence[PendingLine]) -> None:
    if not lines:
        return
    row = tx.execute(
        "SELECT timestamp FROM logs WHERE job_key = ? ORDER BY timestamp DESC, seq DESC LIMIT 1", (key,)
    ).fetchone()
    latest = row[0] if row else ""
    values = []
    for line in sorted(lines, key=lambda pending: pending.captured):
        stamp = max(log_time(line.captured), latest)
        latest = stamp
        values.append((key, stamp, line.severity, line.task_name, line.trial_id, line.message))
    tx.executemany(
        "INSERT INTO logs (job_key, timestamp, severity, task_name, trial_id, message) VALUES (?, ?, ?, ?, ?, ?)",
        values,
    )


def _transition_in_tx(
    tx: _Tx,
    key: int,
    state: JobState,
    allowed_from: frozenset[JobState] | None,
    error_message: str | None,
    detail: str | None,
    still_applies: Callable[[JobRecord], bool] | None,
) -> bool:
    allowed = allowed_from if allowed_from is not None else frozenset(ACTIVE_JOB_STATES)
    rows = tx.execute("SELECT * FROM jobs WHERE key = ?", (key,)).fetchall()
    if not rows:
        raise NotFound(f"no stored job with key {key}")
    record = _record(rows[0])
    if record.state not in allowed:
        return False
    if still_applies is not None and not still_applies(record):
        return False
    now = job_time()
    job = record.job
    job.state = state
    if state != JobState.QUEUED:
        job.job_position = None  # only meaningful while queued
    if state == JobState.PREPARING and job.start_time is None:
        job.start_time = now
    if state in TERMINAL_STATES:
        job.end_time = now
    if error_message is not None:
        job.error_message = error_message
    holds_slot = record.holds_slot and state not in TERMINAL_STATES
    tx.execute(
        "UPDATE jobs SET state = ?, resource = ?, holds_slot = ? WHERE key = ?",
        (state.value, _dump(job), int(holds_slot), key),
    )
    tx.execute(
        "INSERT INTO state_history (job_key, state, at, detail) VALUES (?, ?, ?, ?)",
        (key, state.value, now, detail),
    )
    return True


# Columns added after the first release of the schema: (table, column, definition). A store made
# before one of them gets it on its next open (CREATE TABLE IF NOT EXISTS leaves its table as is).
_ADDED_COLUMNS = (("jobs", "vertex_job_id", "TEXT"), ("jobs", "runtime_environment", "TEXT"),
                  ("jobs", "machine_share", "TEXT"))


def _add_missing_columns(tx: _Tx) -> None:
    for table, column, definition in _ADDED_COLUMNS:
        present = {row[1] for row in tx.execute(f"PRAGMA table_info({table})").fetchall()}
        if column not in present:
            tx.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


def _job(resource: str) -> Job:
    # The job model (pydantic) is loaded by the first record read, not by importing the store:
    # `JobStore.peek` serves the commands that only wait for a state without it.
    from aiptrain.job.spec import Job

    return Job.model_validate(json.loads(resource))


def _record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        key=row["key"],
        project=row["project"],
        job_id=row["job_id"],
        state=JobState(row["state"]),
        job=_job(row["resource"]),
        holds_slot=bool(row["holds_slot"]),
        cancel_requested=bool(row["cancel_requested"]),
        supervisor_pid=row["supervisor_pid"],
        supervisor_start_ticks=row["supervisor_start_ticks"],
        run_token=row["run_token"],
        created_epoch=row["created_epoch"],
        vertex_job_id=row["vertex_job_id"],
        runtime_environment=json.loads(row["runtime_environment"]) if row["runtime_environment"] else None,
        machine_share=json.loads(row["machine_share"]) if row["machine_share"] else None,
    )
