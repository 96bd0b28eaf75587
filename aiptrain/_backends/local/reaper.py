"""Noticing jobs whose supervisor died, and cleaning up after them.

A supervisor writes a terminal state before it exits, so an unfinished job whose supervisor is
gone can never finish: it is marked FAILED (CANCELLED if a cancel was pending; SUCCEEDED if its
primary replica had exited 0, which decides the job) with a reason that says so, and every process
it left is killed. The check runs inside the store's write
lock, so a supervisor that finishes at that very moment is never mistaken for a dead one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from aiptrain._backends.local.layout import JobLayout
from aiptrain._backends.local.store import JobRecord, JobSnapshot, JobStore, PendingLine
from aiptrain._job.state import JobState
from aiptrain._job.task_names import task_name
from aiptrain._replicas.clock import utc_now
from aiptrain._replicas.containers.cleanup import remove_job_containers
from aiptrain._replicas.log_capture import SERVICE_TASK
from aiptrain._replicas.processes import is_running, kill_tokened_processes
from aiptrain._replicas.scratch import remove_scratch

# The task name of a job's primary replica (the master, or the chief in TF_CONFIG).
PRIMARY_TASK = task_name("master", 0)
# A job whose supervisor pid is not recorded yet is given this long to get one.
SUPERVISOR_START_WINDOW = 60.0


def supervisor_alive(record: JobRecord | JobSnapshot) -> bool:
    """Whether the job's supervisor runs; a queued job without one waits for a slot (`launch`). A job
    of a runner (`local serve` on Ray) has none: its runner finishes it, by its own rules."""
    if record.runner is not None:
        return True
    if record.supervisor_pid is None:
        if record.state == JobState.QUEUED:
            return True
        return time.time() - record.created_epoch < SUPERVISOR_START_WINDOW
    return is_running(record.supervisor_pid, record.supervisor_start_ticks)


def kill_job_processes(store: JobStore, record: JobRecord, home: Path) -> None:
    """SIGKILL every replica group of the job still alive, then anything with its token, and remove
    every container, network and volume it created."""
    for replica in store.replicas(record.key):
        if replica.pid is None or replica.pgid is None:
            continue
        # Only a leader that is provably the process we started: pids get reused.
        if is_running(replica.pid, replica.start_ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(replica.pgid, signal.SIGKILL)
    kill_tokened_processes(record.run_token)
    layout = JobLayout.of(home, record.project, record.job_id, record.key)
    remove_job_containers(layout.container_engine, record.run_token)
    remove_scratch(layout.scratch_record)


def reap_if_supervisor_died(store: JobStore, record: JobRecord, home: Path) -> JobRecord:
    """Finish the job if its supervisor is gone; returns the job as it is now."""
    if record.state.is_terminal or supervisor_alive(record):
        return record
    layout = JobLayout.of(home, record.project, record.job_id, record.key)
    pid_text = f"pid {record.supervisor_pid}" if record.supervisor_pid else "never started"
    was_cancelling = record.state == JobState.CANCELLING
    succeeded = not was_cancelling and _primary_exited_0(store, record)
    state = JobState.CANCELLED if was_cancelling else JobState.FAILED
    severity = "ERROR"
    reason = (
        f"The local supervisor of this job ({pid_text}) died unexpectedly (killed or crashed), "
        f"so the job cannot continue; its replica processes (and containers) were stopped. "
        f"The supervisor's own output is in {layout.supervisor_log}."
    )
    if succeeded:
        # The primary's exit decides the job, and it was recorded before the supervisor died.
        state, severity = JobState.SUCCEEDED, "WARNING"
        reason = (f"The local supervisor of this job ({pid_text}) died after {PRIMARY_TASK} exited successfully; "
                  f"the job succeeded and its other replica processes were stopped. The supervisor's own output is "
                  f"in {layout.supervisor_log}.")
    # Stop the processes first: the supervisor is gone for good, so nothing else will.
    kill_job_processes(store, record, home)
    store.transition(
        record.key,
        state,
        error_message=reason if state == JobState.FAILED else None,
        detail="supervisor died",
        still_applies=lambda current: not supervisor_alive(current),
        lines=[PendingLine(utc_now(), severity, SERVICE_TASK, reason)],
    )
    return store.get_by_key(record.key)


def _primary_exited_0(store: JobStore, record: JobRecord) -> bool:
    """Whether the job's primary replica exited 0 (a tuning job's trials each have their own: no)."""
    training_input = record.job.training_input
    if record.state != JobState.RUNNING or (training_input is not None and training_input.hyperparameters):
        return False
    return any(replica.trial_id == "" and replica.task_name == PRIMARY_TASK and replica.exit_code == 0
               for replica in store.replicas(record.key))


def reap_dead_jobs(store: JobStore, home: Path) -> None:
    """Check every unfinished job that has a supervisor (they are few: at most the machine's limit
    are started) and finish those whose supervisor died."""
    for record in store.supervised_jobs():
        reap_if_supervisor_died(store, record, home)

