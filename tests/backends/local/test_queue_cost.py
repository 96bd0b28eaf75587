"""A queued job costs (almost) nothing: no process waits for each queued job; a job's supervisor
starts when a run slot is its, and the queue still drains first come, first served."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import as_new_job
from aiptrain._replicas.processes import is_running
from tests.fixtures.engine import kill_everything, wait_until

PROJECT = "queue-project"
QUEUED = 20


def _resident_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _live_supervisors(engine: LocalJobEngine) -> list[int]:
    rows = engine.store.connection().execute("SELECT supervisor_pid, supervisor_start_ticks FROM jobs").fetchall()
    return [pid for pid, ticks in rows if pid and is_running(pid, ticks)]


def test_queued_jobs_have_no_process_and_drain_in_order(trainer: Path, home: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "1")
    held = subprocess.run([sys.executable, "-m", "aiptrain", "--project", PROJECT, "jobs", "submit", "training",
                           "holder", "--package-path", str(trainer), "--module-name", "trainer.task", "--region",
                           "us-central1", "--async", "--", "sleep"], capture_output=True, text=True, timeout=240,
                          env={**os.environ})
    assert held.returncode == 0, held.stderr
    engine = LocalJobEngine(home)
    try:
        wait_until(lambda: str(engine.get(PROJECT, "holder").state) == "RUNNING", timeout=120, what="it to run")
        template = engine.get(PROJECT, "holder")
        for index in range(QUEUED):
            job = as_new_job(template)
            job.job_id = f"queued_{index:03d}"
            assert job.training_input is not None
            job.training_input.args = ["ok"]
            engine.submit(PROJECT, job)
        supervisors = _live_supervisors(engine)
        assert len(supervisors) <= 1, f"{len(supervisors)} supervisors for 1 running and {QUEUED} queued jobs"
        assert sum(_resident_bytes(pid) for pid in supervisors) < 100 * 2**20
        assert str(engine.get(PROJECT, f"queued_{QUEUED - 1:03d}").job_position) == str(QUEUED)

        engine.cancel(PROJECT, "holder")
        last = f"queued_{QUEUED - 1:03d}"
        wait_until(lambda: str(engine.get(PROJECT, last).state) == "SUCCEEDED", timeout=600, what="the queue to drain")
        starts = [engine.get(PROJECT, f"queued_{index:03d}").start_time or "" for index in range(QUEUED)]
        assert all(starts) and starts == sorted(starts)
        assert all(str(engine.get(PROJECT, f"queued_{index:03d}").state) == "SUCCEEDED" for index in range(QUEUED))
    finally:
        kill_everything(engine)
        engine.store.close()
