"""`local serve --backend ray`: the server's jobs run on a Ray cluster, its store stays the truth.

Every job a client creates is stored here as on the local backend (QUEUED, its log, its history),
under the runner name "ray"; one thread of the server (`RayRunner`) then does what a local job's
supervisor would, for all of them at once:

- **takes** the oldest waiting job and submits it as a Ray job, exactly as `jobs submit training
  --backend ray` submits it (one bundle per replica, runtime environments or containers on the
  nodes, TF_CONFIG, restarts, tuning trials), under a submission ID of its own (`submission_id`);
  it takes the next one only once the cluster has found room for it (its driver left QUEUED), so
  jobs start oldest first and a queue costs rows of the store, not processes or Ray drivers;
- **follows** the jobs it took: copies each one's new log lines here together with how far it has
  copied (`append_runner_logs`), then its state, times, errorMessage and trainingOutput, so a
  reader that sees a job end has every line of it;
- **carries cancels over**: a cancelled job it has not taken is CANCELLED at once (by the engine);
  one it took is stopped on the cluster, whose driver stops its replicas on every node.

Nothing of this lives only in memory: a server started again (after a stop or a SIGKILL) against
the same home and cluster finds the jobs it had taken by their submission IDs and copies on from
the recorded cursor; a job it was taking when it died is found on the cluster (AlreadyExists).

The cluster's absence has two rules. Jobs it held (taken) are marked FAILED, saying so, once the
cluster has not answered for `AIPTRAIN_SERVE_RAY_UNREACHABLE_SECONDS` (default 300); their Ray jobs
are stopped if the cluster comes back while this server runs. Jobs not taken yet wait, QUEUED,
with a log line saying what they wait for, and are taken in their turn once it answers again.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiptrain._backends.local.store import PendingLine
from aiptrain._backends.ray.backend import RayBackend, previous_jobs
from aiptrain._backends.ray.joblog import (
    CANCEL_REQUESTED_LINE,
    CANCELLED_LINE,
    FAILED_PREFIX,
    SERVICE_TASK,
    SUCCEEDED_LINE,
)
from aiptrain._job.logs import LogCursor
from aiptrain._job.state import JobState
from aiptrain._replicas.clock import utc_now
from aiptrain.errors import AiptrainError, AlreadyExists, NotFound, Problem, UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from aiptrain._backends.base import BackendSettings
    from aiptrain._backends.local.store import JobRecord, JobStore
    from aiptrain._job.logs import LogEntry
    from aiptrain._job.spec import Job

RUNNER_NAME = "ray"
UNREACHABLE_VARIABLE = "AIPTRAIN_SERVE_RAY_UNREACHABLE_SECONDS"
DEFAULT_UNREACHABLE_SECONDS = 300.0
TICK_SECONDS = 0.5
# The order a job's states follow; a copy never moves a job back, and passes each state between.
_FORWARD = (JobState.QUEUED, JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING)


def unreachable_bound(environ: dict[str, str] | None = None) -> float:
    """Seconds a silent cluster keeps the jobs it holds; a usage error naming the variable if malformed."""
    text = (environ if environ is not None else os.environ).get(UNREACHABLE_VARIABLE, "").strip()
    if not text:
        return DEFAULT_UNREACHABLE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UsageError(f"{UNREACHABLE_VARIABLE}={text!r} is not a positive number of seconds",
                         hint=f"unset it (default {DEFAULT_UNREACHABLE_SECONDS:.0f}) or give seconds, e.g. 600")
    return value


def submission_id(record: JobRecord) -> str:
    """The Ray job's ID: the job's project and ID (readable in `ray job list`) and a part of its run
    token, so that a job ID used again, or in another project, never meets an older Ray job."""
    return f"{record.project}.{record.job_id}.{record.run_token[:8]}"


def cursor_text(cursor: LogCursor) -> str:
    return f"{cursor.timestamp.astimezone(UTC).isoformat()}|{cursor.insert_id}"


def parse_cursor(text: str | None) -> LogCursor | None:
    if not text:
        return None
    stamp, _, insert_id = text.partition("|")
    return LogCursor(datetime.fromisoformat(stamp), insert_id)


class RayRunner:
    """Runs the server's jobs on the Ray cluster (see the module docstring)."""

    name = RUNNER_NAME

    def __init__(self, home: Path, settings: BackendSettings, *, bound: float | None = None) -> None:
        self.home = home
        self.backend: RayBackend = RayBackend(settings)
        self.address = self.backend.ray_settings.address  # a malformed address is a usage error now
        self.bound = bound if bound is not None else unreachable_bound()
        self.store: JobStore | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._silent_since: float | None = None
        self._silence = ""
        self._stopped: set[str] = set()  # submission IDs told to stop (again after a restart: harmless)
        self._abandoned: set[str] = set()  # Ray jobs failed here while the cluster was silent
        self._told_waiting: set[int] = set()  # job keys whose log says they wait for the cluster
        self._lock: int | None = None  # the home's runner lock, held while this relay runs
        self._last_failure = ""

    # -- the server's side ------------------------------------------------------------------------

    def start(self, store: JobStore) -> None:
        """Start the relay's thread; a usage error if another server runs this home's jobs on Ray
        (two relays would submit and copy every job twice)."""
        self._hold_home()
        self.store = store
        self._thread = threading.Thread(target=self._run, name="ray-runner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop copying (the jobs go on running on the cluster; a next server follows them)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases its lock
            self._lock = None

    def _hold_home(self) -> None:
        import fcntl

        from aiptrain._paths import HomeLayout

        path = HomeLayout(self.home).ray_runner_lock
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise UsageError(f"another `aiptrain local serve --backend ray` runs the jobs of {self.home} already",
                             hint="stop it first, or give this server a home of its own (AIPTRAIN_HOME)") from None
        self._lock = descriptor

    def wake(self) -> None:
        self._wake.set()

    def refusal(self, job: Job) -> list[Problem]:
        """What `jobs submit training --backend ray` refuses (what Ray cannot run, a replica no node
        of the cluster can hold); a cluster that does not answer refuses nothing now (see `_take`)."""
        return self.backend.unsupported(job)

    def reachable(self) -> str | None:
        """None if the cluster answers now; why not otherwise (for the server's start-up line)."""
        try:
            self.backend.answers()
        except AiptrainError as error:
            return error.message
        return None

    # -- the loop ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.tick()
                self._last_failure = ""
            except Exception as error:  # one bad tick must not end the copying of every job
                self._report(repr(error))
            self._wake.wait(TICK_SECONDS)

    def _report(self, failure: str) -> None:
        """A failed tick on the server's stderr, once per different failure (ticks come twice a second)."""
        import sys

        if failure != self._last_failure:
            self._last_failure = failure
            print(f"aiptrain: the Ray relay failed a round, and goes on: {failure}", file=sys.stderr, flush=True)

    def tick(self) -> None:
        """Follow every job taken, then take the next waiting one if the cluster has room for it."""
        assert self.store is not None
        records = self.store.runner_jobs(self.name)
        taken = [record for record in records if record.runner_job]
        try:
            for record in taken:
                self._follow(record)
            if self._abandoned:
                self.backend.answers()
                self._stop_abandoned()
            self._take_next(self.store.runner_jobs(self.name))
        except AiptrainError as error:  # the Jobs API did not answer: nothing is known of its jobs
            self._note_silence(taken, error.message)
            return
        self._silent_since = None

    # -- following a taken job ----------------------------------------------------------------------

    def _follow(self, record: JobRecord) -> None:
        assert self.store is not None and record.runner_job
        ray_id = record.runner_job
        if record.state == JobState.CANCELLING and ray_id not in self._stopped:
            with contextlib.suppress(NotFound):
                self.backend.stop_job(ray_id)
            self._stopped.add(ray_id)
        try:
            job, entries = self.backend.job_and_new_lines(ray_id, parse_cursor(record.runner_log_cursor))
        except NotFound:
            self._finish(record, JobState.FAILED, f"The Ray cluster at {self.address} no longer has this job's Ray "
                         f"job {ray_id} (the cluster was restarted, or the job deleted there), so its end is unknown.")
            return
        if entries:
            # A cancel asked here was logged here: the driver's own line for it would say it twice.
            kept = [entry for entry in entries if not (record.cancel_requested and _is_cancel_line(entry))]
            self.store.append_runner_logs(record.key, [_pending(entry) for entry in kept],
                                          cursor_text(entries[-1].cursor))
        if job.training_output is not None and job.training_output != record.job.training_output:
            output = job.training_output

            def set_output(stored: Job) -> None:
                stored.training_output = output

            self.store.update_resource(record.key, set_output)
        self._move(record, job)

    def _move(self, record: JobRecord, job: Job) -> None:
        """Bring the stored state to the Ray job's, through each state between, never back."""
        assert self.store is not None
        state = job.state or JobState.QUEUED
        if state.is_terminal:
            if record.state == JobState.CANCELLING and state == JobState.FAILED and record.runner_job in self._stopped:
                state = JobState.CANCELLED  # stopped while it failed: the cancel was asked first
            if job.start_time is not None:  # it ran: its startTime and history say so, even if this
                self._forward(record, JobState.RUNNING)  # copy never saw it running
            self._finish(record, state, job.error_message if state == JobState.FAILED else None)
            return
        self._forward(record, state)

    def _forward(self, record: JobRecord, state: JobState) -> None:
        assert self.store is not None
        if state not in _FORWARD or record.state not in _FORWARD:
            return
        for step in _FORWARD[_FORWARD.index(record.state) + 1:_FORWARD.index(state) + 1]:
            self.store.transition(record.key, step, detail="on the Ray cluster")

    def _finish(self, record: JobRecord, state: JobState, error_message: str | None) -> None:
        """The job's end, with its last line when its log lacks it (a driver stopped before it could
        print it, or an end decided here: the cluster silent, the Ray job gone)."""
        assert self.store is not None
        if state == JobState.CANCELLED:
            last, severity = CANCELLED_LINE, "INFO"
        elif state == JobState.FAILED:
            last, severity = f"{FAILED_PREFIX}{error_message or 'the Ray job failed.'}", "ERROR"
        else:
            last, severity = SUCCEEDED_LINE, "INFO"
        lines = [] if self._logged_last(record.key, last) else [_service_line(last, severity)]
        self.store.transition(record.key, state, error_message=error_message, detail="on the Ray cluster",
                              lines=lines)
        if record.runner_job:
            self.backend.forget_log(record.runner_job)
            self._stopped.discard(record.runner_job)

    def _logged_last(self, key: int, line: str) -> bool:
        """Whether one of the job's last few log lines is `line`."""
        assert self.store is not None
        cursor = self.store.tail_cursor(key, 8)
        return any(entry.message == line for entry in self.store.read_logs(key, after=cursor, limit=50))

    # -- the cluster's silence ----------------------------------------------------------------------

    def _note_silence(self, taken: list[JobRecord], why: str = "") -> None:
        """Jobs held past the bound fail, saying so; waiting jobs are told, once, what they wait for."""
        assert self.store is not None
        now = time.monotonic()
        if self._silent_since is None:
            self._silent_since = now
        self._silence = why or self._silence
        if now - self._silent_since >= self.bound:
            for record in taken:
                current = self.store.get_by_key(record.key)
                if current.state.is_terminal:
                    continue
                self._finish(current, JobState.FAILED, (
                    f"The Ray cluster at {self.address} has not answered for {self.bound:.0f} s "
                    f"({self._silence or 'no answer'}); the job it ran there is lost to this server, so it is "
                    "marked FAILED."))
                if current.runner_job:
                    self._abandoned.add(current.runner_job)
        self._tell_waiting(self.store.runner_jobs(self.name))

    def _tell_waiting(self, records: list[JobRecord]) -> None:
        assert self.store is not None
        for record in records:
            if record.runner_job or record.key in self._told_waiting or record.state != JobState.QUEUED:
                continue
            self._told_waiting.add(record.key)
            self.store.append_logs(record.key, [_service_line(
                f"Waiting for the Ray cluster at {self.address}, which does not answer "
                f"({self._silence or 'no answer'}): the job starts in its turn once it does.", "WARNING")])

    def _stop_abandoned(self) -> None:
        for ray_id in sorted(self._abandoned):
            with contextlib.suppress(NotFound):
                self.backend.stop_job(ray_id)
            self._abandoned.discard(ray_id)

    # -- taking the next job ------------------------------------------------------------------------

    def _take_next(self, records: list[JobRecord]) -> None:
        """Take the oldest waiting job, unless the last one taken still waits for room on the cluster."""
        if any(record.runner_job and record.state == JobState.QUEUED for record in records):
            return
        for record in records:
            if record.runner_job:
                continue
            if self._take(record):
                return

    def _take(self, record: JobRecord) -> bool:
        """Submit the job as its Ray job; True once it is (or was already) on the cluster, False if it
        failed its checks (the next one may go). The Jobs API's error if the cluster did not answer."""
        from aiptrain._backends.local.launch import dispatch_lock

        assert self.store is not None
        # The engine cancels a job nobody took under this lock: never both at once.
        with dispatch_lock(self.home):
            current = self.store.get_by_key(record.key)
            if current.state != JobState.QUEUED or current.runner_job:
                return False
            self.backend.answers()  # silence is the cluster's, not the job's: it waits
            problems = self.refusal(current.job)
            ray_id = submission_id(current)
            if not problems:
                try:
                    self.backend.submit_job(current.job, submission_id=ray_id, project=current.project,
                                            vertex_job_id=current.vertex_job_id,
                                            previous_jobs=self._previous_jobs(current))
                except AlreadyExists:
                    pass  # taken by a server that died before it could record it
                except AiptrainError as error:
                    self.backend.answers()
                    problems = [Problem("", error.message, error.hint)]
            if problems:
                message = "; ".join(problem.message for problem in problems)
                self._finish(current, JobState.FAILED,
                             f"The Ray cluster at {self.address} cannot run this job: {message}")
                return False
            self.store.set_runner_job(current.key, ray_id)
            self.store.append_logs(current.key, [_service_line(
                f"Submitted to the Ray cluster at {self.address} as Ray job {ray_id}.")])
        self._told_waiting.discard(record.key)
        return True

    def _previous_jobs(self, record: JobRecord) -> dict[str, Any]:
        """The job resumePreviousJobId names, from this server's store."""
        assert self.store is not None
        store = self.store
        return previous_jobs(record.job, lambda previous_id: store.get(record.project, previous_id).job.to_api())


def _is_cancel_line(entry: LogEntry) -> bool:
    return entry.task_name == SERVICE_TASK and entry.message == CANCEL_REQUESTED_LINE


def _pending(entry: LogEntry) -> PendingLine:
    return PendingLine(entry.timestamp, entry.severity, entry.task_name, entry.message, entry.trial_id)


def _service_line(message: str, severity: str = "INFO") -> PendingLine:
    """A line of the server's own about the job (as the local engine's `service` lines)."""
    return PendingLine(utc_now(), severity, SERVICE_TASK, message)
