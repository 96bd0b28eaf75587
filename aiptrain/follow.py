"""Following a job: stream its log entries and poll its state until it ends.

Shared by `--stream-logs`, `jobs stream-logs` and `jobs wait` on every backend. Unlike gcloud
(60 s polls, a 5 s window it never reads, and two empty polls before stopping), this reads from
a (timestamp, insertId) cursor, polls fast while lines arrive and backs off when idle, and stops
as soon as the job is terminal and one last read returns nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from aiptrain.errors import TransientError
from aiptrain.spec import Job, JobState

if TYPE_CHECKING:
    from aiptrain.backends.base import Backend, LogCursor, LogEntry

READ_LIMIT = 1000
T = TypeVar("T")


class Poller(Protocol):
    # Seconds to wait before the next poll, given whether the last one found anything.
    def next_delay(self, got_entries: bool, retry_after: float | None = None) -> float: ...


@dataclass(frozen=True)
class FollowResult:
    job: Job
    timed_out: bool = False


def poller_for(backend: Backend, polling_interval: float | None = None) -> Poller:
    """Fast polls for the local store, gentler ones for REST; a fixed interval when asked for."""
    from aiptrain.polling import AdaptivePoller

    if polling_interval is not None:
        return AdaptivePoller(fast=polling_interval, ceiling=polling_interval, jitter=0.0)
    if backend.name == "local":
        return AdaptivePoller(fast=0.05, ceiling=0.25)
    return AdaptivePoller(fast=0.5, ceiling=10.0)


def _retrying(call: Callable[[], T], poller: Poller, sleep: Callable[[float], None]) -> T:
    """Retry transient failures (429, 5xx, dropped connections) for as long as it takes."""
    while True:
        try:
            return call()
        except TransientError as error:
            sleep(poller.next_delay(False, error.retry_after))


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
) -> FollowResult:
    """Print entries through `on_entry` (None: state only) until the job ends or `timeout` passes."""
    poller = poller or poller_for(backend)
    deadline = None if timeout is None else clock() + timeout
    cursor: LogCursor | None = None
    job = _retrying(lambda: backend.get_job(job_id), poller, sleep)
    ended = _is_terminal(job)
    while True:
        got = False
        if on_entry is not None:
            entries = _retrying(_reader(backend, job_id, cursor, task_name), poller, sleep)
            for entry in entries:
                on_entry(entry)
                cursor = entry.cursor
            got = bool(entries)
            if len(entries) >= READ_LIMIT:
                continue  # more are waiting: read on without sleeping
        if ended and not got:
            return FollowResult(job)
        if not got:
            job = _retrying(lambda: backend.get_job(job_id), poller, sleep)
            if _is_terminal(job):
                ended = True
                continue  # one last read for lines written just before the end
        if deadline is not None and clock() >= deadline:
            return FollowResult(job, timed_out=True)
        sleep(poller.next_delay(got))


def _reader(backend: Backend, job_id: str, after: LogCursor | None,
            task_name: str | None) -> Callable[[], list[LogEntry]]:
    return lambda: backend.read_logs(job_id, after=after, task_name=task_name, limit=READ_LIMIT)


def _is_terminal(job: Job) -> bool:
    return job.state is not None and JobState(job.state).is_terminal
