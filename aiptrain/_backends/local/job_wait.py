"""`jobs wait` on the local backend without the job model: the state read straight from the store.

Waiting for a local job is a loop of cheap reads. Without pydantic and the engine, the command
starts sooner and takes less CPU from the job it waits for. Whatever is out of the ordinary
goes through the engine, as every other command does: a store holding a job no supervisor was
started for (the engine's start-up sweep starts it), and a job whose supervisor died (the
engine fails it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiptrain._backends.local.reaper import supervisor_alive
from aiptrain._backends.local.store import JobSnapshot, JobStore
from aiptrain._backends.polling import LOCAL_POLL_SECONDS, AdaptivePoller
from aiptrain._job.state import JobState, WaitResult


def wait_for_local_job(
    home: Path,
    project: str,
    job_id: str,
    *,
    timeout: float | None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> WaitResult:
    """Poll the job until it ends or `timeout` passes; NotFound if there is no such job."""
    store = JobStore(home)
    try:
        if store.has_unlaunched():
            _through_engine(home, project, job_id)  # its start-up sweep starts what a submitter left
        poller = AdaptivePoller(*LOCAL_POLL_SECONDS)
        deadline = None if timeout is None else clock() + timeout
        while True:
            snapshot = store.peek(project, job_id)
            resource = _current(home, project, job_id, snapshot, store)
            if JobState(resource.get("state", JobState.STATE_UNSPECIFIED)).is_terminal:
                return WaitResult(resource, timed_out=False)
            if deadline is not None and clock() >= deadline:
                return WaitResult(resource, timed_out=True)
            delay = poller.next_delay(False)
            sleep(delay if deadline is None else max(0.0, min(delay, deadline - clock())))
    finally:
        store.close()


def _current(home: Path, project: str, job_id: str, snapshot: JobSnapshot, store: JobStore) -> dict[str, Any]:
    """The job as `LocalJobEngine.get` would present it."""
    if snapshot.state.is_terminal:
        return snapshot.resource
    if not supervisor_alive(snapshot):
        return _through_engine(home, project, job_id)  # the engine fails the job and says why
    if snapshot.state == JobState.QUEUED and not snapshot.holds_slot:
        return {**snapshot.resource, "jobPosition": str(store.queue_position(snapshot.key, snapshot.runner))}
    return snapshot.resource


def _through_engine(home: Path, project: str, job_id: str) -> dict[str, Any]:
    from aiptrain._backends.local.job_engine import LocalJobEngine

    engine = LocalJobEngine(home)
    try:
        return engine.get(project, job_id).to_api()
    finally:
        engine.store.close()
