"""The limit on running jobs is the machine's: one value in force whatever each submitter's
AIPTRAIN_LOCAL_MAX_RUNNING said, no job overtakes older queued ones, and `describe` says it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from aiptrain._backends.local.job_engine import LocalJobEngine
from tests.fixtures.engine import kill_everything, wait_until

PROJECT = "limit-project"


def _aiptrain(*argv: str, max_running: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if max_running is not None:
        env["AIPTRAIN_LOCAL_MAX_RUNNING"] = str(max_running)
    return subprocess.run([sys.executable, "-m", "aiptrain", "--project", PROJECT, *argv], capture_output=True,
                          text=True, timeout=240, env=env)


def _submit(job_id: str, package: Path, mode: str, max_running: int) -> None:
    result = _aiptrain("jobs", "submit", "training", job_id, "--package-path", str(package), "--module-name",
                       "trainer.task", "--region", "us-central1", "--async", "--", mode, max_running=max_running)
    assert result.returncode == 0, result.stderr


def _describe(job_id: str) -> dict[str, str]:
    result = _aiptrain("jobs", "describe", job_id, "--format", "json")
    assert result.returncode == 0, result.stderr
    document: dict[str, str] = json.loads(result.stdout)
    return document


def test_mixed_limits_keep_first_come_first_served(trainer: Path, home: Path) -> None:
    engine = LocalJobEngine(home)
    try:
        _submit("holder", trainer, "sleep", 1)
        wait_until(lambda: _describe("holder")["state"] == "RUNNING", timeout=120, what="the first job to run")
        for job_id in ("older_1", "older_2"):
            _submit(job_id, trainer, "sleep", 1)
        _submit("newer", trainer, "sleep", 8)
        wait_until(lambda: _describe("newer")["state"] != "QUEUED", timeout=60, what="the newest job to start")
        started = {job_id: _describe(job_id).get("startTime") or "" for job_id in ("older_1", "older_2", "newer")}
        assert started["older_1"] and started["older_2"], started  # nobody overtook them
        assert started["older_1"] <= started["newer"] and started["older_2"] <= started["newer"], started
        described = _aiptrain("jobs", "describe", "newer")
        assert "at most 8 job(s) run at once on this machine" in described.stdout + described.stderr
    finally:
        kill_everything(engine)
        engine.store.close()
