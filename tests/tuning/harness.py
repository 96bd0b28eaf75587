"""Helpers for the tuning tests: job bodies, waiting, what trials recorded, cleanup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import HyperparameterOutput, Job, JobState
from tests.fixtures.engine import kill_everything, max_overlap, wait_until

__all__ = ["kill_everything", "max_overlap", "wait_until"]

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


def job_log(engine: LocalJobEngine, job_id: str) -> str:
    return "\n".join(f"  {e.severity} {e.task_name} [{e.trial_id or ''}] {e.message}"
                     for e in engine.logs(PROJECT, job_id))


def wait_for_end(engine: LocalJobEngine, job_id: str, timeout: float = 120.0) -> Job:
    try:
        return wait_until(lambda: _ended(engine, job_id), timeout, f"job {job_id} to end")
    except AssertionError:
        raise AssertionError(f"job {job_id} did not end; its log:\n{job_log(engine, job_id)}") from None


def _ended(engine: LocalJobEngine, job_id: str) -> Job | None:
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


