"""Helpers for the tuning tests: job bodies, waiting, what trials recorded, cleanup."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiptrain.runner.engine import LocalEngine
from aiptrain.runner.processes import is_running, kill_tokened_processes
from aiptrain.spec import HyperparameterOutput, Job, JobState

TRAINERS = Path(__file__).parent / "trainers"
PROJECT = "tuning-project"
TERMINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


def tuning_job(job_id: str, package_uri: str, hyperparameters: dict[str, Any], *, args: list[str] | None = None,
               job_dir: str | None = None, **training_input: Any) -> Job:
    data: dict[str, Any] = {
        "scaleTier": "BASIC",
        "region": "us-central1",
        "runtimeVersion": "2.11",
        "packageUris": [package_uri],
        "pythonModule": "hptrainer.task",
        "jobDir": job_dir if job_dir is not None else f"gs://out/{job_id}",
        "hyperparameters": hyperparameters,
        **training_input,
    }
    if args:
        data["args"] = args
    return Job.model_validate({"jobId": job_id, "trainingInput": data})


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def job_log(engine: LocalEngine, job_id: str) -> str:
    return "\n".join(f"  {e.severity} {e.task_name} [{e.trial_id or ''}] {e.message}"
                     for e in engine.logs(PROJECT, job_id))


def wait_for_end(engine: LocalEngine, job_id: str, timeout: float = 120.0) -> Job:
    try:
        return wait_until(lambda: _ended(engine, job_id), timeout, f"job {job_id} to end")
    except AssertionError:
        raise AssertionError(f"job {job_id} did not end; its log:\n{job_log(engine, job_id)}") from None


def _ended(engine: LocalEngine, job_id: str) -> Job | None:
    job = engine.get(PROJECT, job_id)
    return job if job.state in TERMINAL else None


def trials_of(job: Job) -> list[HyperparameterOutput]:
    assert job.training_output is not None and job.training_output.trials is not None, job.to_api()
    return job.training_output.trials


def records(home: Path, job_id: str) -> dict[str, dict[str, Any]]:
    """Trial ID -> what the trainer recorded in JOB_DIR/TRIAL/record.json."""
    root = home / "storage" / "out" / job_id
    found = {}
    for path in sorted(root.glob("*/record.json")):
        found[path.parent.name] = json.loads(path.read_text())
    return found


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals that hold one instant."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))
    current = peak = 0
    for _, change in events:
        current += change
        peak = max(peak, current)
    return peak


def kill_everything(engine: LocalEngine) -> None:
    """Kill every supervisor and replica of every job in this engine's store."""
    rows = engine.store.connection().execute(
        "SELECT supervisor_pid, supervisor_start_ticks, run_token FROM jobs").fetchall()
    for pid, ticks, _token in rows:
        if pid and is_running(pid, ticks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for _pid, _ticks, token in rows:
        kill_tokened_processes(token)
