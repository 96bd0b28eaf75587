"""`aiptrain local prune` deletes finished jobs (rows, logs, directories, packages no job still
uses), compacts the store so its file shrinks, and never touches a running job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from aiptrain._backends.local.job_engine import LocalJobEngine
from tests.fixtures.engine import kill_everything, wait_until
from tests.fixtures.large_logs import finished_job_with_lines

PROJECT = "prune-project"


def _aiptrain(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", "--project", PROJECT, *argv], capture_output=True,
                          text=True, timeout=240, env={**os.environ})


def _state(engine: LocalJobEngine, job_id: str) -> str:
    return str(engine.get(PROJECT, job_id).state)


def _store_bytes(home: Path) -> int:
    return sum((home / name).stat().st_size for name in ("jobs.db", "jobs.db-wal") if (home / name).exists())


def test_prune_shrinks_the_store_and_spares_the_running_job(trainer: Path, home: Path) -> None:
    finished_job_with_lines(home, PROJECT, "big", 100_000, width=200)
    old_dir = home / "jobs" / PROJECT / "big"
    old_dir.mkdir(parents=True)
    (old_dir / "supervisor.log").write_text("x" * 1000)
    submitted = _aiptrain("jobs", "submit", "training", "running", "--package-path", str(trainer), "--module-name",
                          "trainer.task", "--region", "us-central1", "--async", "--", "sleep")
    assert submitted.returncode == 0, submitted.stderr
    engine = LocalJobEngine(home)
    try:
        wait_until(lambda: _state(engine, "running") == "RUNNING", timeout=120, what="it to run")
        training_input = engine.get(PROJECT, "running").training_input
        assert training_input is not None and training_input.package_uris
        running_package = training_input.package_uris[0]
        time.sleep(1.1)
        before = _store_bytes(home)
        assert before > 20_000_000

        dry = _aiptrain("local", "prune", "--older-than", "1s", "--dry-run", "--format", "json")
        assert dry.returncode == 0, dry.stderr
        planned = json.loads(dry.stdout)
        assert [job["jobId"] for job in planned["jobs"]] == ["big"]
        assert planned["bytes"] > 20_000_000
        assert _store_bytes(home) == before and old_dir.exists()

        pruned = _aiptrain("local", "prune", "--older-than", "1s")
        assert pruned.returncode == 0, pruned.stderr
        assert "Deleted 1 job(s)" in pruned.stdout
        assert _store_bytes(home) < before / 4
        assert not old_dir.exists()
        assert _aiptrain("jobs", "describe", "big").returncode != 0
        assert _state(engine, "running") == "RUNNING"
        assert any("hello from" in entry.message for entry in engine.logs(PROJECT, "running"))
        staged = home / "storage" / running_package.removeprefix("gs://")
        assert staged.exists()
        assert (home / "jobs" / PROJECT / "running").is_dir()
    finally:
        kill_everything(engine)
        engine.store.close()


def test_a_named_running_job_is_refused(trainer: Path, home: Path) -> None:
    submitted = _aiptrain("jobs", "submit", "training", "busy", "--package-path", str(trainer), "--module-name",
                          "trainer.task", "--region", "us-central1", "--async", "--", "sleep")
    assert submitted.returncode == 0, submitted.stderr
    engine = LocalJobEngine(home)
    try:
        refused = _aiptrain("local", "prune", "busy")
        assert refused.returncode != 0
        assert "only finished jobs are pruned" in refused.stderr
        assert _state(engine, "busy") in ("QUEUED", "PREPARING", "RUNNING")
    finally:
        kill_everything(engine)
        engine.store.close()


def test_disk_usage_names_every_part(home: Path) -> None:
    finished_job_with_lines(home, PROJECT, "some", 1000)
    result = _aiptrain("local", "disk-usage", "--format", "json")
    assert result.returncode == 0, result.stderr
    parts = {part["part"]: part for part in json.loads(result.stdout)["parts"]}
    assert parts["job store (jobs, logs)"]["bytes"] > 0
    assert {"job directories", "local storage (gs://)", "runtime environments", "uv cache"} <= set(parts)
