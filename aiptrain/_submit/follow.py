"""Following a job: stream its log entries and poll its state until it ends.

Shared by `--stream-logs`, `jobs stream-logs` and `jobs wait` on every backend. Unlike gcloud
(60 s polls, a 5 s window it never reads, and two empty polls before stopping), this reads from
a (timestamp, insertId) cursor, polls fast while lines arrive and backs off when idle, and stops
as soon as the job is terminal and one last read returns nothing.

When the service fails (429, 5xx, no answer at all):
- once the job has been found, every transient failure is retried with the usual back-off, so
  a long follow survives an overloaded or restarting service; the first failure of each outage
  is reported once through `on_warning` ("... ; retrying"), not once per attempt;
- with a `timeout`, retrying stops at the deadline like any other wait: the result is
  `timed_out` and says the endpoint could not be reached (`unreachable`); if the job was never
  found, `NotReachedInTime` (exit 12, like any timeout) is raised since there is no state to show;
- without a `timeout`, an endpoint that gives no answer at all to the very first request
  (connection refused, unknown host) is a wrong endpoint, not an outage: its error is raised as
  `jobs describe` would raise it (exit 1) instead of retrying forever. A first request answered
  with 429/5xx is retried: the service is there, just busy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from aiptrain._backends.polling import AdaptivePoller, retry_deadline
from aiptrain._job.spec import Job, JobState
from aiptrain.errors import EXIT_JOB_TIMEOUT, EndpointUnreachable, OperationalError, TransientError

if TYPE_CHECKING:
    from aiptrain._backends.base import Backend
    from aiptrain._job.logs import LogCursor, LogEntry

READ_LIMIT = 1000
T = TypeVar("T")


class Poller(Protocol):
    # Seconds to wait before the next poll, given whether the last one found anything.
    def next_delay(self, got_entries: bool, retry_after: float | None = None) -> float: ...


@dataclass(frozen=True)
class FollowResult:
    job: Job
    timed_out: bool = False
    # Why the last polls before a timeout failed (e.g. "cannot reach http://..."), if they did.
    unreachable: str | None = None


class NotReachedInTime(OperationalError):
    """The timeout passed before the job could be read even once."""

    exit_code = EXIT_JOB_TIMEOUT


class _DeadlinePassed(Exception):
    def __init__(self, error: TransientError) -> None:
        super().__init__(error.message)
        self.error = error


def poller_for(backend: Backend, polling_interval: float | None = None) -> Poller:
    """The pace the backend asks for (`Backend.poll_seconds`); a fixed interval when asked for."""
    if polling_interval is not None:
        return AdaptivePoller(fast=polling_interval, ceiling=polling_interval, jitter=0.0)
    fast, ceiling = backend.poll_seconds
    return AdaptivePoller(fast=fast, ceiling=ceiling)


@dataclass
class _Retrier:
    """Runs one follow's backend calls, retrying transient failures as the module docstring says."""

    poller: Poller
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    deadline: float | None
    on_warning: Callable[[str], None] | None
    found_job: bool = False
    failing: bool = False  # inside an outage: its first failure has been reported already

    def __call__(self, call: Callable[[], T]) -> T:
        while True:
            try:
                result = call()
            except TransientError as error:
                if self.deadline is None and not self.found_job and isinstance(error, EndpointUnreachable):
                    raise
                if self.deadline is not None and self.clock() >= self.deadline:
                    raise _DeadlinePassed(error) from None
                if not self.failing and self.on_warning is not None:
                    self.on_warning(f"{error.message}; retrying")
                self.failing = True
                delay = self.poller.next_delay(False, error.retry_after)
                if self.deadline is not None:
                    delay = max(0.0, min(delay, self.deadline - self.clock()))
                self.sleep(delay)
                continue
            self.failing = False
            return result


def follow_job(
    backend: Backend,
    job_id: str,
    *,
    on_entry: Callable[[LogEntry], None] | None,
    task_name: str | None = None,
    timeout: float | None = None,
    poller: Poller | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_warning: Callable[[str], None] | None = None,
    start: LogCursor | None = None,
    tail: int | None = None,
) -> FollowResult:
    """Print entries through `on_entry` (None: state only) until the job ends or `timeout` passes.

    Entries after `start` only (`--since`), and of those already written only the last `tail`
    (`--tail`). `on_warning` gets one line when the service starts failing (see the module docstring).
    """
    poller = poller or poller_for(backend)
    deadline = None if timeout is None else clock() + timeout
    retrying = _Retrier(poller, sleep, clock, deadline, on_warning)
    # The retries inside one REST call stop at the deadline too (time.monotonic, whatever `clock`).
    with retry_deadline(None if timeout is None else time.monotonic() + timeout):
        try:
            job = retrying(lambda: backend.get_job(job_id))
        except _DeadlinePassed as passed:
            raise NotReachedInTime(
                f"gave up on job [{job_id}] after {timeout:g} s without reading it: {passed.error.message}",
                hint=passed.error.hint) from None
        retrying.found_job = True
        if tail is not None and on_entry is not None:
            try:
                start = _tail_start(retrying, backend, job_id, start, task_name, tail)
            except _DeadlinePassed as passed:
                return FollowResult(job, timed_out=True, unreachable=passed.error.message)
        return _follow(backend, job_id, job, on_entry, task_name, deadline, poller, sleep, clock, retrying, start)


def _tail_start(retrying: _Retrier, backend: Backend, job_id: str, start: LogCursor | None,
                task_name: str | None, tail: int) -> LogCursor | None:
    """The cursor just before the last `tail` entries written so far (`Backend.tail_cursor`: the
    local store seeks there, other backends read the log through once)."""
    found: LogCursor | None = retrying(lambda: backend.tail_cursor(job_id, tail, after=start, task_name=task_name))
    return found


def _follow(backend: Backend, job_id: str, job: Job, on_entry: Callable[[LogEntry], None] | None,
            task_name: str | None, deadline: float | None, poller: Poller, sleep: Callable[[float], None],
            clock: Callable[[], float], retrying: _Retrier, start: LogCursor | None) -> FollowResult:
    cursor = start
    ended = _is_terminal(job)
    while True:
        got = False
        try:
            if on_entry is not None:
                entries = retrying(_reader(backend, job_id, cursor, task_name))
                for entry in entries:
                    on_entry(entry)
                    cursor = entry.cursor
                got = bool(entries)
                if len(entries) >= READ_LIMIT:
                    continue  # more are waiting: read on without sleeping
            if ended and not got:
                return FollowResult(job)
            if not got:
                job = retrying(lambda: backend.get_job(job_id))
                if _is_terminal(job):
                    ended = True
                    continue  # one last read for lines written just before the end
        except _DeadlinePassed as passed:
            # `job` as last read: the state it was in before the service stopped answering.
            return FollowResult(job, timed_out=True, unreachable=passed.error.message)
        if deadline is not None and clock() >= deadline:
            return FollowResult(job, timed_out=True)
        sleep(poller.next_delay(got))


def _reader(backend: Backend, job_id: str, after: LogCursor | None,
            task_name: str | None) -> Callable[[], list[LogEntry]]:
    return lambda: backend.read_logs(job_id, after=after, task_name=task_name, limit=READ_LIMIT)


def _is_terminal(job: Job) -> bool:
    return job.state is not None and JobState(job.state).is_terminal
