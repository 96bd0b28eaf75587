"""Jobs stored as QUEUED whose supervisor was never started, found and started.

Submitting is two steps: store the job, then start its supervisor. A submitter killed in between
(Ctrl-C at the wrong instant, an OOM kill, a closed terminal) leaves a QUEUED job nobody runs,
ahead of every later job in the queue. So the submitter holds an exclusive lock on
`$AIPTRAIN_HOME/launching/<run token>.lock` from before the insert until the supervisor's pid is
recorded; any later engine (every CLI command, `local serve`, a supervisor waiting for a slot)
sweeps the QUEUED jobs without a supervisor, and starts the supervisor of each whose lock it can
take. Holding the lock while starting it makes two sweepers never start the same job twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from aiptrain.backends.local.store import JobRecord, JobStore
from aiptrain.job.spec import JobState


def _lock_path(home: Path, run_token: str) -> Path:
    return home / "launching" / f"{run_token}.lock"


@contextlib.contextmanager
def launch_lock(home: Path, run_token: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the job's launch lock; yields False (without holding it) if `wait` is off and it is taken."""
    path = _lock_path(home, run_token)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    finally:
        os.close(descriptor)


def recover_unlaunched(store: JobStore, home: Path, start: Callable[[JobRecord], None]) -> list[str]:
    """Start the supervisor of every QUEUED job that has none and no submitter still at work;
    returns the recovered job IDs."""
    recovered: list[str] = []
    for record in store.active_jobs():
        if record.state != JobState.QUEUED or record.supervisor_pid is not None:
            continue
        with launch_lock(home, record.run_token, wait=False) as held:
            if not held:
                continue  # its submitter is still starting it
            current = store.get_by_key(record.key)
            if current.state == JobState.QUEUED and current.supervisor_pid is None:
                start(current)
                recovered.append(current.job_id)
    return recovered
