"""The local engine's API: submit, get, list, cancel and read the logs of local jobs.

Everything is in the store; each submitted job gets a detached supervisor process that outlives
the caller. `get` and `list` notice jobs whose supervisor died and finish them as FAILED.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import contextlib
import os
import secrets
import signal
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from aiptrain._backends.local.filters import compile_filter
from aiptrain._backends.local.launch import dispatch, dispatch_lock, launch_lock
from aiptrain._backends.local.layout import JobLayout, run_limit_line
from aiptrain._backends.local.reaper import reap_dead_jobs, reap_if_supervisor_died
from aiptrain._backends.local.runner import JobRunner
from aiptrain._backends.local.store import (
    JobLogEntry,
    JobRecord,
    JobStore,
    PendingLine,
    ReplicaRecord,
    StateChange,
)
from aiptrain._backends.local.store_errors import is_out_of_space
from aiptrain._backends.local.supervisor_start import start_supervisor, supervisor_environment
from aiptrain._backends.local.uninterrupted import interrupts_deferred
from aiptrain._job.filters import parse_filter
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import Job, JobState, as_new_job
from aiptrain._paths import PACKAGE_DIR, aiptrain_home
from aiptrain._replicas.clock import utc_now
from aiptrain._replicas.log_capture import SERVICE_TASK
from aiptrain._replicas.processes import is_running, process_start_ticks
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain.errors import EtagMismatch, JobAlreadyFinished, OperationalError, UsageError

MAX_PAGE_SIZE = 1000


@dataclass(frozen=True)
class JobProcesses:
    """The processes behind a job, for diagnostics and tests."""

    supervisor_pid: int | None
    run_token: str
    replicas: list[ReplicaRecord]


def _page_token(key: int) -> str:
    return base64.urlsafe_b64encode(f"k{key}".encode()).decode().rstrip("=")


def _key_from_token(token: str) -> int:
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        if text.startswith("k") and text[1:].isdigit():
            return int(text[1:])
    except (binascii.Error, UnicodeDecodeError):
        pass
    raise UsageError(f"invalid page token {token!r}", hint="pass the nextPageToken of the previous page")


class LocalJobEngine:
    def __init__(self, home: Path | None = None, *, runner: JobRunner | None = None) -> None:
        """runner: what runs the jobs this engine creates instead of local supervisors (`local serve
        --backend ray`); the jobs are stored, listed, read and cancelled here all the same."""
        self.home = home if home is not None else aiptrain_home()
        self.runner = runner
        self.store = JobStore(self.home)
        # A dead supervisor's slot is freed first, so that the queue can move on into it.
        reap_dead_jobs(self.store, self.home)
        self.recover_unlaunched()

    # -- submit -------------------------------------------------------------------------------

    def submit(self, project: str, job: Job, *, vertex_job_id: str | None = None) -> Job:
        """Store the job as QUEUED and start its supervisor; AlreadyExists if the ID is taken.

        `vertex_job_id`: the numeric ID of the Vertex AI job this job runs (the emulator's
        customJobs); its replicas then run the way Vertex ran them (see `ReplicaSetSpec`).
        """
        if not job.job_id:
            raise UsageError("the job has no jobId", hint="pass a JOB id to `jobs submit training`")
        settings = ReplicaSettings.from_env()  # a bad setting is the submitter's usage error, found now
        if os.environ.get("AIPTRAIN_LOCAL_MAX_RUNNING", "").strip():
            # The machine has one limit: the latest submit that sets it sets it for every job.
            self.store.set_max_running(settings.max_running)
        # The store sets the state, the times and its own etag.
        fresh = as_new_job(job)
        token = secrets.token_hex(12)
        if self.runner is not None:
            return self._hand_to_runner(self.runner, project, fresh, token, vertex_job_id)
        # No dispatcher starts the job half stored; a Ctrl-C waits until it is stored and dispatched.
        with interrupts_deferred():
            with launch_lock(self.home, token):
                record = self.store.insert_job(project, fresh, token, vertex_job_id=vertex_job_id)
                self.store.append_logs(record.key, [PendingLine(utc_now(), "INFO", SERVICE_TASK, "Job QUEUED.")])
            self._dispatch(submitted=record.key)
            if self.store.get_by_key(record.key).supervisor_pid is None:
                limit = self.store.max_running(settings.max_running)
                self.store.append_logs(record.key, [PendingLine(
                    utc_now(), "INFO", SERVICE_TASK, f"Waiting for a free slot: {run_limit_line(limit)}")])
        return self.get(project, fresh.job_id or "")

    def _hand_to_runner(self, runner: JobRunner, project: str, job: Job, token: str,
                        vertex_job_id: str | None) -> Job:
        record = self.store.insert_job(project, job, token, vertex_job_id=vertex_job_id, runner=runner.name)
        self.store.append_logs(record.key, [PendingLine(utc_now(), "INFO", SERVICE_TASK, "Job QUEUED.")])
        runner.wake()
        return self.get(project, job.job_id or "")

    def _start_or_fail(self, record: JobRecord) -> None:
        try:
            self._start_supervisor(record)
        except OSError as error:
            self.store.transition(
                record.key, JobState.FAILED, error_message=f"The local supervisor could not be started: {error}"
            )

    def recover_unlaunched(self) -> list[str]:
        """Start the supervisors of the oldest queued jobs the machine has room for (see `launch`)."""
        return self._dispatch(submitted=None)

    def _dispatch(self, *, submitted: int | None) -> list[str]:
        def start(record: JobRecord) -> None:
            if record.key != submitted:
                self.store.append_logs(record.key, [PendingLine(
                    utc_now(), "INFO", SERVICE_TASK, "A run slot is free: the job's supervisor starts now.")])
            self._start_or_fail(record)

        try:
            default = ReplicaSettings.from_env().max_running
        except UsageError:
            default = ReplicaSettings.from_env({}).max_running  # a bad setting is the submitter's to report
        return dispatch(self.store, self.home, default, start)

    def _start_supervisor(self, record: JobRecord) -> None:
        layout = JobLayout.of(self.home, record.project, record.job_id, record.key)
        layout.claim(record.run_token)
        # The supervisor must import this very aiptrain, installed or not.
        package_parent = str(PACKAGE_DIR.parent)
        env = supervisor_environment(os.environ, record.run_token, self.home, package_parent)
        pid = start_supervisor(self.home, record.key, layout.root, layout.supervisor_log, env,
                               store_path=self.store.path, release_store=self.store.close)
        self.store.set_supervisor(record.key, pid, process_start_ticks(pid))

    # -- read ---------------------------------------------------------------------------------

    def _current(self, record: JobRecord) -> JobRecord:
        return reap_if_supervisor_died(self.store, record, self.home)

    def _present(self, record: JobRecord) -> Job:
        job = record.job
        if record.state == JobState.QUEUED and not record.holds_slot:
            job.job_position = self.store.queue_position(record.key, record.runner)
        return job

    def get(self, project: str, job_id: str) -> Job:
        """The job as it is now; NotFound. A job whose supervisor died becomes FAILED here."""
        return self._present(self._current(self.store.get(project, job_id)))

    def list(
        self,
        project: str,
        *,
        page_size: int = 100,
        page_token: str | None = None,
        filter: str | None = None,
        vertex: bool | None = None,
    ) -> tuple[list[Job], str | None]:
        """One page of the project's jobs, newest first, and the token of the next page (or None);
        `vertex` keeps only the jobs that run Vertex AI jobs (True) or only the others (False)."""
        if page_size < 1:
            raise UsageError(f"page size {page_size} is not positive", hint="use a page size of 1 or more")
        size = min(page_size, MAX_PAGE_SIZE)
        before = _key_from_token(page_token) if page_token else None
        job_filter = parse_filter(filter, source="filter")
        condition = compile_filter(job_filter)  # what SQL can narrow; the whole filter is applied below
        reap_dead_jobs(self.store, self.home)
        records = self.store.list_jobs(
            project, limit=size + 1, before_key=before, where=condition.where, params=condition.params, vertex=vertex
        )
        next_token = _page_token(records[size - 1].key) if len(records) > size else None
        page = [self._present(record) for record in records[:size]]
        return [job for job in page if job_filter.matches(job.to_api())], next_token

    def projects(self) -> builtins.list[str]:
        """Every project that has a job here, in name order."""
        return self.store.projects()

    def vertex_job_ids(self, project: str) -> dict[str, str]:
        """Job ID -> the numeric ID of the Vertex AI job it runs, for the project's Vertex jobs."""
        return self.store.vertex_job_ids(project)

    def vertex_job_id(self, project: str, job_id: str) -> str | None:
        """The numeric ID of the Vertex AI job `job_id` runs, None for an ml v1 job; NotFound."""
        return self.store.get(project, job_id).vertex_job_id

    def state_history(self, project: str, job_id: str) -> builtins.list[StateChange]:
        return self.store.state_history(self.store.get(project, job_id).key)

    def processes(self, project: str, job_id: str) -> JobProcesses:
        record = self.store.get(project, job_id)
        return JobProcesses(record.supervisor_pid, record.run_token, self.store.replicas(record.key))

    # -- cancel -------------------------------------------------------------------------------

    def cancel(self, project: str, job_id: str) -> Job:
        """Ask the job to stop: CANCELLING now, CANCELLED once its processes are gone."""
        record = self._current(self.store.get(project, job_id))
        if record.state.is_terminal:
            raise JobAlreadyFinished(
                f"job {job_id!r} already ended ({record.state.value}); it cannot be cancelled",
            )
        if record.state == JobState.QUEUED and record.supervisor_pid is None and self._cancel_unlaunched(record):
            return self.get(project, job_id)
        try:
            record = self.store.request_cancel(record.key)
            self.store.append_logs(record.key, [PendingLine(utc_now(), "INFO", SERVICE_TASK, "Cancel requested.")])
        except Exception as error:
            if not is_out_of_space(error):
                raise
            # A full disk must not keep a job running: its supervisor stops it on SIGTERM alone.
            self._signal_supervisor(record)
            raise OperationalError(
                f"no space left on {self.home} to record the cancel of job {job_id!r}; its supervisor was told "
                "to stop it", hint="free some space there so that the job's end can be recorded, then "
                f"`aiptrain jobs describe {job_id}`") from error
        self._signal_supervisor(record)
        if self.runner is not None and record.runner is not None:
            self.runner.wake()
        return self.get(project, job_id)

    def _cancel_unlaunched(self, record: JobRecord) -> bool:
        """CANCELLED at once for a queued job no supervisor (nor runner) runs yet (none will start it
        meanwhile: dispatchers, and runners taking a job, wait for this); False if one was started after all."""
        with dispatch_lock(self.home):
            changed = self.store.transition(
                record.key, JobState.CANCELLED, allowed_from=frozenset({JobState.QUEUED}), detail="cancel requested",
                still_applies=lambda current: current.supervisor_pid is None and current.runner_job is None,
                lines=[PendingLine(utc_now(), "INFO", SERVICE_TASK, "Cancel requested."),
                       PendingLine(utc_now(), "INFO", SERVICE_TASK, "Job cancelled.")])
        return changed is not None

    @staticmethod
    def _signal_supervisor(record: JobRecord) -> None:
        pid = record.supervisor_pid
        if pid is not None and is_running(pid, record.supervisor_start_ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)

    # -- update -------------------------------------------------------------------------------

    def update_labels(
        self, project: str, job_id: str, labels: dict[str, str] | None, *, expected_etag: str | None = None
    ) -> Job:
        """Replace the job's labels (None keeps them), only if its etag is `expected_etag` when given."""
        record = self.store.get(project, job_id)

        def mutate(job: Job) -> None:
            if expected_etag is not None and job.etag != expected_etag:
                raise EtagMismatch(f"job {job_id!r} has etag {job.etag!r}, not {expected_etag!r}")
            if labels is not None:
                job.labels = dict(labels) or None

        self.store.update_resource(record.key, mutate)
        return self.get(project, job_id)

    # -- logs ---------------------------------------------------------------------------------

    def logs(
        self,
        project: str,
        job_id: str,
        *,
        after: LogCursor | None = None,
        task_name: str | None = None,
        limit: int = 1000,
    ) -> builtins.list[LogEntry]:
        """Entries strictly after `after`, in (timestamp, insert_id) order; at most `limit`."""
        key = self.store.get(project, job_id).key
        return self.store.read_logs(key, after=after, task_name=task_name, limit=limit)

    def project_logs(
        self, project: str, *, job_ids: builtins.list[str] | None = None, after: LogCursor | None = None,
        descending: bool = False, not_before: datetime | None = None, limit: int = 1000,
    ) -> builtins.list[JobLogEntry]:
        """Entries of the project's jobs (or of `job_ids`) after `after` in either order (see the store)."""
        return self.store.read_project_logs(project, job_ids=job_ids, after=after, descending=descending,
                                            not_before=not_before, limit=limit)

    def tail_cursor(self, project: str, job_id: str, count: int, *, after: LogCursor | None = None,
                    task_name: str | None = None) -> LogCursor | None:
        """Where the last `count` entries after `after` start (see `JobStore.tail_cursor`)."""
        key = self.store.get(project, job_id).key
        return self.store.tail_cursor(key, count, after=after, task_name=task_name)
