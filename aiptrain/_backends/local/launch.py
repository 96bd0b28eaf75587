"""Starting supervisors when a run slot is theirs: a queued job has no process.

A job is stored QUEUED without a supervisor; `dispatch` starts the supervisors of the oldest such
jobs, as many as the machine's limit on running jobs leaves room for (the jobs holding a slot and
the queued ones whose supervisor already waits for one count against it). It runs after every
submit, at the start of every engine (every CLI command, `local serve`), when a supervisor ends
(its slot is free) and while a started supervisor waits for its slot. A queue of hundreds of
jobs thus costs store rows, not processes, and nothing polls per queued job.

Submitting is two steps: store the job, then dispatch. A submitter killed in between leaves a
QUEUED job that the next dispatch starts in its turn. Dispatchers take `dispatch.lock` in turn,
and each job's `launching/<run token>.lock` while starting it: the submitter holds the latter
while it stores the job, so no dispatcher starts a job half stored, and two dispatchers never
start the same job twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from aiptrain._backends.local.store import JobRecord, JobStore
from aiptrain._job.spec import JobState
from aiptrain._paths import HomeLayout


def _lock_path(home: Path, run_token: str) -> Path:
    return HomeLayout(home).launching / f"{run_token}.lock"


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


@contextlib.contextmanager
def dispatch_lock(home: Path) -> Iterator[None]:
    """One dispatcher at a time per home: the room it counts is not taken by another meanwhile."""
    descriptor = os.open(HomeLayout(home).dispatch_lock, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def dispatch(store: JobStore, home: Path, default_limit: int, start: Callable[[JobRecord], None]) -> list[str]:
    """Start the supervisors of the oldest QUEUED jobs that have none, while the machine's limit
    leaves room; returns their job IDs. A job whose submitter is still storing it stops the round
    (first come, first served): that submitter dispatches right after."""
    started: list[str] = []
    with dispatch_lock(home):
        room = store.launch_room(default_limit)
        if room <= 0:
            return started
        for record in store.unlaunched(room):
            with launch_lock(home, record.run_token, wait=False) as held:
                if not held:
                    break
                current = store.get_by_key(record.key)
                if current.state == JobState.QUEUED and current.supervisor_pid is None:
                    start(current)
                    started.append(current.job_id)
    return started
