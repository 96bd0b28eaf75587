"""`local prune` never touches live work: a running job's outputs under the pruned job's folder,
spelled another way, survive `--outputs`, and the command says what it kept and why."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from aiptrain.backends.local.engine import LocalEngine
from aiptrain.backends.local.launch import launch_lock
from aiptrain.backends.local.store import JobStore
from aiptrain.job.spec import Job
from aiptrain.job.state import JobState
from aiptrain.paths import HomeLayout
from tests.fixtures.engine import home, kill_everything, quick_settings, wait_until
from tests.fixtures.tiny_trainer import trainer

__all__ = ["home", "quick_settings", "trainer"]

PROJECT = "live-work-project"


def _aiptrain(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", "--project", PROJECT, *argv], capture_output=True,
                          text=True, timeout=240, env={**os.environ})


def _finished_job(home: Path, job_id: str, job_dir: str) -> None:
    store = JobStore(home)
    try:
        token = secrets.token_hex(12)
        with launch_lock(home, token):  # no engine starts a supervisor for it meanwhile
            job = Job.model_validate({"jobId": job_id, "trainingInput": {
                "region": "us-central1", "pythonModule": "trainer.task", "jobDir": job_dir}})
            record = store.insert_job(PROJECT, job, token)
            store.transition(record.key, JobState.SUCCEEDED)
    finally:
        store.close()


def test_prune_outputs_spares_a_running_job_below_the_pruned_folder(trainer: Path, home: Path) -> None:
    storage = HomeLayout(home).storage
    _finished_job(home, "old", "gs://live-bkt/out/")
    (storage / "live-bkt" / "out").mkdir(parents=True)
    (storage / "live-bkt" / "out" / "old-model.txt").write_text("old")
    submitted = _aiptrain("jobs", "submit", "training", "running", "--package-path", str(trainer), "--module-name",
                          "trainer.task", "--region", "us-central1", "--job-dir", "gs://live-bkt/out/sub/",
                          "--", "sleep")
    assert submitted.returncode == 0, submitted.stderr
    engine = LocalEngine(home)
    try:
        wait_until(lambda: str(engine.get(PROJECT, "running").state) == "RUNNING", timeout=120, what="it to run")
        checkpoint = storage / "live-bkt" / "out" / "sub" / "checkpoint-1"
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        checkpoint.write_text("what the running job wrote")

        pruned = _aiptrain("local", "prune", "old", "--outputs", "--format", "json")
        assert pruned.returncode == 0, pruned.stderr
        summary = json.loads(pruned.stdout)
        assert summary["deleted"] == 1 and summary["outputs"] == []
        [kept] = summary["kept"]
        assert kept["path"] == str(storage / "live-bkt" / "out")
        assert "running" in kept["reason"] and "gs://live-bkt/out/sub/" in kept["reason"]
        assert checkpoint.read_text() == "what the running job wrote"
        assert str(engine.get(PROJECT, "running").state) == "RUNNING"

        text = _aiptrain("local", "prune", "--older-than", "0s", "--outputs", "--dry-run")
        assert text.returncode == 0, text.stderr
        assert "No finished job to prune." in text.stdout  # "old" is gone; the running job is not finished
    finally:
        kill_everything(engine)
        engine.store.close()
