"""The local job store's jobs: their insertion (job-ID uniqueness is a UNIQUE constraint), the
lookups a listing or a describe runs (each an index lookup, never a scan), and the state changes,
each recorded in the job's history in the transaction that makes it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiptrain._backends.local.store_connection import StoreConnection
from aiptrain._backends.local.store_logs import PendingLine, append_logs_in_tx
from aiptrain._backends.local.store_records import (
    ACTIVE_JOB_STATES,
    ACTIVE_STATES,
    JobRecord,
    JobSnapshot,
    StateChange,
    dump_job,
    job_record,
)
from aiptrain._backends.local.store_slots import stored_max_running
from aiptrain._job.state import TERMINAL_STATES, JobState
from aiptrain._replicas.clock import job_time
from aiptrain.errors import AlreadyExists, NotFound

if TYPE_CHECKING:
    from aiptrain._backends.local.store_connection import Transaction
    from aiptrain._job.spec import Job


class JobQueries(StoreConnection):
    """The jobs section of the job store."""

    def insert_job(self, project: str, job: Job, run_token: str, *, vertex_job_id: str | None = None,
                   runner: str | None = None) -> JobRecord:
        """Store a new job as QUEUED; AlreadyExists if the project already has this job ID.

        `vertex_job_id`: the numeric ID of the Vertex AI job it runs, for jobs the emulator took in
        as Vertex jobs (their replicas run the way Vertex ran them).
        `runner`: what runs the job instead of a local supervisor (`runner_jobs`); no local
        dispatcher, reaper or slot count ever touches such a job.
        """
        assert job.job_id
        job.state = JobState.QUEUED
        job.create_time = job_time()
        try:
            with self._write() as tx:
                cursor = tx.execute(
                    "INSERT INTO jobs (project, job_id, state, resource, run_token, created_epoch, vertex_job_id,"
                    " runner) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (project, job.job_id, JobState.QUEUED.value, dump_job(job), run_token, time.time(), vertex_job_id,
                     runner),
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
        return job_record(self._one_job(project, job_id))

    def peek(self, project: str, job_id: str) -> JobSnapshot:
        """The job's state and stored resource without its model (no pydantic); NotFound."""
        row = self._one_job(project, job_id)
        return JobSnapshot(key=row["key"], state=JobState(row["state"]), resource=json.loads(row["resource"]),
                           supervisor_pid=row["supervisor_pid"], supervisor_start_ticks=row["supervisor_start_ticks"],
                           created_epoch=row["created_epoch"], holds_slot=bool(row["holds_slot"]),
                           runner=row["runner"])

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
            "SELECT 1 FROM jobs WHERE state = ? AND supervisor_pid IS NULL AND runner IS NULL LIMIT 1",
            (JobState.QUEUED.value,)
        ).fetchone()
        return row is not None

    def unlaunched(self, limit: int) -> list[JobRecord]:
        """The oldest QUEUED jobs without a supervisor, first come first, at most `limit`."""
        rows = self._read("SELECT * FROM jobs WHERE state = ? AND supervisor_pid IS NULL AND runner IS NULL"
                          " ORDER BY key LIMIT ?",
                          (JobState.QUEUED.value, limit))
        return [job_record(row) for row in rows]

    def launch_room(self, default_limit: int) -> int:
        """How many more supervisors may start: the machine's limit (`max_running`) less the jobs
        holding a slot and the queued ones whose supervisor waits for one."""
        execute = self.connection().execute
        limit = stored_max_running(execute, default_limit)
        taken = execute(
            "SELECT COUNT(*) FROM jobs WHERE holds_slot = 1"
            " OR (state = ? AND supervisor_pid IS NOT NULL)", (JobState.QUEUED.value,)).fetchone()[0]
        return max(0, limit - int(taken))

    def supervised_jobs(self) -> list[JobRecord]:
        """Unfinished jobs that have (or should have) a supervisor: all but those queued without one."""
        marks = ",".join("?" * len(ACTIVE_STATES))
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks})"  # noqa: S608
                          " AND NOT (state = ? AND supervisor_pid IS NULL) AND runner IS NULL ORDER BY key",
                          (*ACTIVE_STATES, JobState.QUEUED.value))
        return [job_record(row) for row in rows]

    def get_by_key(self, key: int) -> JobRecord:
        rows = self._read("SELECT * FROM jobs WHERE key = ?", (key,))
        if not rows:
            raise NotFound(f"no stored job with key {key}")
        return job_record(rows[0])

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
        return [job_record(row) for row in self._read(sql, args)]

    def active_jobs(self) -> list[JobRecord]:
        """Jobs not in a terminal state, on any project (few: they are running or waiting)."""
        marks = ",".join("?" * len(ACTIVE_STATES))  # placeholders only; values are bound
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY key", ACTIVE_STATES)  # noqa: S608
        return [job_record(row) for row in rows]

    def set_runtime_environment(self, key: int, environment: dict[str, Any]) -> None:
        """Record what the job runs in (its interpreter, TensorFlow, packages, the notes said)."""
        with self._write() as tx:
            tx.execute("UPDATE jobs SET runtime_environment = ? WHERE key = ?", (json.dumps(environment), key))

    def set_runs_containers(self, key: int, containers: bool) -> None:
        """Record whether the job's replicas are containers: PREPARING's one answer, which every
        later reader (the job's replica sets, `jobs describe`) takes from here."""
        with self._write() as tx:
            tx.execute("UPDATE jobs SET runs_containers = ? WHERE key = ?", (int(containers), key))

    def runner_jobs(self, runner: str) -> list[JobRecord]:
        """The unfinished jobs `runner` runs, oldest first (the ones it has yet to take among them)."""
        marks = ",".join("?" * len(ACTIVE_STATES))
        rows = self._read(f"SELECT * FROM jobs WHERE state IN ({marks}) AND runner = ? ORDER BY key",  # noqa: S608
                          (*ACTIVE_STATES, runner))
        return [job_record(row) for row in rows]

    def set_runner_job(self, key: int, runner_job: str) -> None:
        """Record that the job's runner took it, under this ID of its own."""
        with self._write() as tx:
            tx.execute("UPDATE jobs SET runner_job = ? WHERE key = ?", (runner_job, key))

    def append_runner_logs(self, key: int, lines: Sequence[PendingLine], cursor: str) -> None:
        """Store lines copied from the runner's log together with how far it has been copied, so that
        a copier that stops anywhere resumes with the next line, never a line twice."""
        with self._write() as tx:
            append_logs_in_tx(tx, key, lines)
            tx.execute("UPDATE jobs SET runner_log_cursor = ? WHERE key = ?", (cursor, key))

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
                append_logs_in_tx(tx, key, lines)
        return self.get_by_key(key) if changed else None

    def update_resource(self, key: int, mutate: Callable[[Job], None]) -> JobRecord:
        """Change service-filled fields (trainingOutput, ...) of the stored resource atomically."""
        with self._write() as tx:
            rows = tx.execute("SELECT * FROM jobs WHERE key = ?", (key,)).fetchall()
            if not rows:
                raise NotFound(f"no stored job with key {key}")
            job = job_record(rows[0]).job
            mutate(job)
            tx.execute("UPDATE jobs SET resource = ? WHERE key = ?", (dump_job(job), key))
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


def _transition_in_tx(
    tx: Transaction,
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
    record = job_record(rows[0])
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
        (state.value, dump_job(job), int(holds_slot), key),
    )
    tx.execute(
        "INSERT INTO state_history (job_key, state, at, detail) VALUES (?, ?, ?, ?)",
        (key, state.value, now, detail),
    )
    return True
