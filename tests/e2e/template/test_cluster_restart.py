"""The template on the local backend survives losing a worker mid-run, as the service's jobs did.

Under MultiWorkerMirroredStrategy the chief's collectives fail as soon as a worker dies, so the
engine restarts the whole cluster and both replicas continue from the chief's last checkpoint.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._cli.main import root
from aiptrain._job.spec import JobState
from tests.fixtures.engine import engine, home, quick_settings, state_of
from tests.fixtures.template import TEMPLATE_DIR, TINY_HYPERPARAMETERS, checkpoint_steps, wait_for

__all__ = ["engine", "home", "quick_settings"]

pytestmark = pytest.mark.slow

PROJECT = "restart-project"
TRAIN_STEPS = 300


def test_killed_worker_restarts_the_cluster_from_the_last_checkpoint(
    engine: LocalJobEngine, home: Path, digits, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_RESTART_DELAY", "0.5")
    submitted = CliRunner().invoke(root, [
        "jobs", "submit", "training", "lose_worker", "--project", PROJECT,
        "--package-path", str(TEMPLATE_DIR / "trainer"), "--module-name", "trainer.task",
        "--region", "us-central1", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
        "--worker-machine-type", "n1-standard-4", "--worker-count", "1", "--runtime-version", "2.11",
        "--job-dir", "gs://restart/lose_worker",
        "--", *digits.trainer_args(), *TINY_HYPERPARAMETERS, "--train-steps", str(TRAIN_STEPS),
        "--checkpoint-steps", "30", "--log-steps", "30",
    ], catch_exceptions=False)
    assert submitted.exit_code == 0, submitted.stderr
    checkpoints = home / "storage" / "restart" / "lose_worker" / "checkpoints"
    wait_for(lambda: len(checkpoint_steps(checkpoints.parent)) >= 2
             or state_of(engine.get(PROJECT, "lose_worker")).is_terminal, timeout=240, what="two checkpoints")
    assert not state_of(engine.get(PROJECT, "lose_worker")).is_terminal, "killed too late: the job had ended"
    worker = {r.task_name: r for r in engine.processes(PROJECT, "lose_worker").replicas}["worker-replica-0"]
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)

    done = wait_for(lambda: state_of(job := engine.get(PROJECT, "lose_worker")).is_terminal and job,
                    timeout=300, what="the job to end")
    log = [(e.task_name, e.message) for e in engine.logs(PROJECT, "lose_worker")]
    text = "\n".join(f"[{task}] {message}" for task, message in log)
    assert done.state == JobState.SUCCEEDED, done.error_message or text[-4000:]
    assert any(task == "service" and "restarting every replica" in message for task, message in log), text[-4000:]
    restored = [int(m.group(1)) for task, message in log if task == "master-replica-0"
                for m in [re.search(r"restored checkpoint \S+ckpt-(\d+) at step \1\b", message)] if m]
    assert restored and restored[-1] >= 30, text[-4000:]
    assert any(task == "master-replica-0" and f"training from step {restored[-1]} to step {TRAIN_STEPS}" in message
               for task, message in log), text[-4000:]
    assert any(task == "worker-replica-0" and "restored checkpoint" in message for task, message in log)
