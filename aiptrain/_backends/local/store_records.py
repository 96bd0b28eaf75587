"""What the local job store hands out about jobs, and how a row of its `jobs` table becomes one.

The job model (pydantic) is loaded only when a record is read: `JobSnapshot` serves the commands
that wait for a state without it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiptrain._job.state import TERMINAL_STATES, JobState

if TYPE_CHECKING:
    from aiptrain._job.spec import Job

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
    # Whether its replicas are containers, recorded when it was prepared (`set_runs_containers`);
    # None before then (and for a job an earlier release prepared).
    runs_containers: bool | None = None
    # What runs the job when no local supervisor does (`local serve --backend ray`: "ray"), else None;
    # the ID that runner knows it by once it took the job, and how far the job's log was copied.
    runner: str | None = None
    runner_job: str | None = None
    runner_log_cursor: str | None = None


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
    runner: str | None = None


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


def _etag(resource: str) -> str:
    return base64.b64encode(hashlib.sha256(resource.encode()).digest()[:8]).decode()


def dump_job(job: Job) -> str:
    job.etag = None
    text = json.dumps(job.to_api(), sort_keys=True)
    job.etag = _etag(text)
    return json.dumps(job.to_api(), sort_keys=True)


def job_model(resource: str) -> Job:
    # The job model (pydantic) is loaded by the first record read, not by importing the store:
    # `JobStore.peek` serves the commands that only wait for a state without it.
    from aiptrain._job.spec import Job

    return Job.model_validate(json.loads(resource))


def job_record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        key=row["key"],
        project=row["project"],
        job_id=row["job_id"],
        state=JobState(row["state"]),
        job=job_model(row["resource"]),
        holds_slot=bool(row["holds_slot"]),
        cancel_requested=bool(row["cancel_requested"]),
        supervisor_pid=row["supervisor_pid"],
        supervisor_start_ticks=row["supervisor_start_ticks"],
        run_token=row["run_token"],
        created_epoch=row["created_epoch"],
        vertex_job_id=row["vertex_job_id"],
        runtime_environment=json.loads(row["runtime_environment"]) if row["runtime_environment"] else None,
        machine_share=json.loads(row["machine_share"]) if row["machine_share"] else None,
        runs_containers=None if row["runs_containers"] is None else bool(row["runs_containers"]),
        runner=row["runner"],
        runner_job=row["runner_job"],
        runner_log_cursor=row["runner_log_cursor"],
    )
