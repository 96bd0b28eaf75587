"""A supervisor killed after the job's primary replica exited 0 leaves a SUCCEEDED job: the
primary's exit decides the job, and it was recorded before the supervisor died. What the job left
outside its files (its replicas' temporary directory) goes with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import JobState
from tests.fixtures.engine import kill_everything, wait_until

PROJECT = "death-project"
TASK = """
import json, os, tempfile, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
if task["type"] == "evaluator":
    with tempfile.NamedTemporaryFile(prefix="evaluator-", delete=False) as kept:
        print("temp file:", kept.name, flush=True)
    time.sleep(300)
print("primary done", flush=True)
"""
CONFIG = ("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  evaluatorType: n1-standard-4\n"
          "  evaluatorCount: 1\n")


def test_a_supervisor_killed_after_the_primary_exited_0_leaves_the_job_succeeded(
        trainer: Path, home: Path, tmp_path: Path, monkeypatch: object) -> None:
    (trainer / "task.py").write_text(TASK)
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    # The evaluator's grace keeps the supervisor alive after the primary's exit, long enough to kill it.
    env = {**os.environ, "AIPTRAIN_LOCAL_EVALUATOR_GRACE": "300"}
    submitted = subprocess.run([sys.executable, "-m", "aiptrain", "--project", PROJECT, "jobs", "submit", "training",
                                "after_exit", "--package-path", str(trainer), "--module-name", "trainer.task",
                                "--region", "us-central1", "--config", str(config), "--async"],
                               capture_output=True, text=True, timeout=240, env=env)
    assert submitted.returncode == 0, submitted.stderr
    engine = LocalJobEngine(home)
    try:
        wait_until(lambda: any("Waiting up to" in entry.message for entry in engine.logs(PROJECT, "after_exit")),
                   timeout=120, what="the primary to exit and the evaluator's grace to start")
        temp_file = Path(next(entry.message for entry in engine.logs(PROJECT, "after_exit")
                              if entry.message.startswith("temp file: ")).split(": ", 1)[1])
        # The replicas' TMPDIR is the job's own, in the system's temporary directory.
        assert temp_file.is_file() and temp_file.parent.name.startswith("aiptrain-job-")
        supervisor = engine.processes(PROJECT, "after_exit").supervisor_pid
        assert supervisor is not None
        os.kill(supervisor, signal.SIGKILL)
        wait_until(lambda: JobState(str(engine.get(PROJECT, "after_exit").state)).is_terminal, timeout=60,
                   what="the job to end")
        job = engine.get(PROJECT, "after_exit")
        assert job.state == JobState.SUCCEEDED, job.error_message
        assert any("exited successfully" in entry.message and "supervisor" in entry.message
                   for entry in engine.logs(PROJECT, "after_exit"))
        assert not temp_file.parent.exists()  # removed by the reaper, as by a supervisor that ends
    finally:
        kill_everything(engine)
        engine.store.close()
