"""`local prune` never touches live work: a running job's outputs under the pruned job's folder,
spelled another way, survive `--outputs`, and the command says what it kept and why; a job
submitted while a prune runs keeps the package it reused."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import aiptrain
from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._backends.local.launch import launch_lock
from aiptrain._backends.local.store import JobStore
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import Job
from aiptrain._job.state import JobState
from aiptrain._paths import HomeLayout
from aiptrain._submit.flag_values import build_submit_options
from aiptrain._submit.staging import UploadResult
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
    engine = LocalJobEngine(home)
    try:
        wait_until(lambda: str(engine.get(PROJECT, "running").state) == "RUNNING", timeout=120, what="it to run")
        checkpoint = storage / "live-bkt" / "out" / "sub" / "checkpoint-1"
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        checkpoint.write_text("what the running job wrote")

        said = _aiptrain("local", "prune", "old", "--outputs", "--dry-run")
        assert said.returncode == 0, said.stderr
        assert (f"Kept {storage / 'live-bkt' / 'out'}: job running (project {PROJECT}, RUNNING) writes to "
                "gs://live-bkt/out/sub/.") in said.stdout.splitlines()

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


def test_a_package_reused_while_a_prune_runs_stays(trainer: Path, home: Path) -> None:
    submitted = _aiptrain("jobs", "submit", "training", "first", "--package-path", str(trainer), "--module-name",
                          "trainer.task", "--region", "us-central1", "--staging-bucket", "gs://race-staging")
    assert submitted.returncode == 0, submitted.stderr
    engine = LocalJobEngine(home)
    try:
        wait_until(lambda: str(engine.get(PROJECT, "first").state) == "SUCCEEDED", timeout=180, what="it to end")
        options, problems = build_submit_options(
            "second", {"package_path": str(trainer), "module_name": "trainer.task",
                       "staging_bucket": "gs://race-staging"},
            catalog=load_catalog(), project=PROJECT, region="us-central1")
        assert problems == []
        staged: list[UploadResult] = []
        pruned: list[subprocess.CompletedProcess[str]] = []

        def prune_meanwhile(result: UploadResult) -> None:
            # Between staging (the package is reused: "first" names it) and storing "second": the window
            # in which a prune that plans and then deletes sees a package no stored job names.
            staged.append(result)
            pruned.append(_aiptrain("local", "prune", "first", "--format", "json"))

        job = aiptrain.Client(project=PROJECT).submit_options(options, on_upload=prune_meanwhile)
        [result] = staged
        assert result.action == "reused"
        assert job.training_input is not None and job.training_input.package_uris == [result.uri]
        assert (HomeLayout(home).storage / result.uri.removeprefix("gs://")).is_file()
        summary = json.loads(pruned[0].stdout)
        assert summary["deleted"] == 1
        assert summary["packages"] and summary["kept"][0]["reason"].startswith("a submit in progress")
        ended = wait_until(lambda: engine.get(PROJECT, "second") if str(engine.get(PROJECT, "second").state) in (
            "SUCCEEDED", "FAILED") else None, timeout=180, what="it to end")
        assert str(ended.state) == "SUCCEEDED", ended.error_message
    finally:
        kill_everything(engine)
        engine.store.close()
