"""A replica killed mid-run resumes from its last checkpoint; SIGTERM saves one before exiting."""

from __future__ import annotations

import re
import signal

import pytest

from tests.fixtures.template import (
    TINY_HYPERPARAMETERS,
    checkpoint_steps,
    latest_checkpoint_step,
    logged_steps,
    trainer_environment,
    wait_for,
)

pytestmark = pytest.mark.slow

ENDLESS = "1000000"


def test_killed_trainer_resumes_from_its_last_checkpoint(tmp_path, digits, launcher):
    """Runs from the template directory itself, like ``gcloud ai-platform local train``."""
    job_dir = tmp_path / "job"
    env = trainer_environment()
    common = [*digits.trainer_args(), *TINY_HYPERPARAMETERS, "--checkpoint-steps", "30", "--log-steps", "10"]

    first = launcher.start("first-run", [*common, "--train-steps", ENDLESS, "--job-dir", str(job_dir)], env=env)
    wait_for(lambda: (latest_checkpoint_step(job_dir) or 0) >= 60 or first.process.poll() is not None,
             timeout=120, what="two checkpoints")
    first.process.send_signal(signal.SIGKILL)
    assert launcher.wait(first, timeout=30) == -signal.SIGKILL, launcher.dump()
    resumed_from = latest_checkpoint_step(job_dir)
    assert resumed_from is not None and resumed_from >= 60, launcher.dump()

    target = resumed_from + 20
    second = launcher.start("second-run", [*common, "--train-steps", str(target), "--job-dir", str(job_dir)], env=env)
    assert launcher.wait(second, timeout=120) == 0, launcher.dump()

    log = second.log()
    assert re.search(rf"restored checkpoint \S+ckpt-{resumed_from} at step {resumed_from}\b", log), log[-2000:]
    assert f"training from step {resumed_from} to step {target}" in log
    steps = logged_steps(log)
    assert steps and min(steps) > resumed_from and steps[-1] == target
    assert latest_checkpoint_step(job_dir) == target


def test_sigterm_saves_a_checkpoint_and_exits(tmp_path, digits, launcher):
    job_dir = tmp_path / "job"
    args = [
        *digits.trainer_args(),
        *TINY_HYPERPARAMETERS,
        "--train-steps", ENDLESS,
        "--checkpoint-steps", ENDLESS,  # no scheduled checkpoint: the only one comes from SIGTERM
        "--log-steps", "10",
        "--job-dir", str(job_dir),
    ]
    replica = launcher.start("terminated", args, env=trainer_environment())
    wait_for(lambda: logged_steps(replica.log()) or replica.process.poll() is not None, timeout=120,
             what="training to start")
    assert not checkpoint_steps(job_dir)
    replica.process.send_signal(signal.SIGTERM)
    assert launcher.wait(replica, timeout=60) == 128 + signal.SIGTERM, launcher.dump()

    stopped = re.search(r"stopped at step (\d+) after SIGTERM", replica.log())
    assert stopped is not None, replica.log()[-2000:]
    stopped_at = int(stopped.group(1))
    assert stopped_at >= 10
    assert checkpoint_steps(job_dir) == [stopped_at]
    assert latest_checkpoint_step(job_dir) == stopped_at
    assert not (job_dir / "export").exists()
