"""One replica without TF_CONFIG, run from the template installed as a setuptools sdist."""

from __future__ import annotations

import pytest

from tests.fixtures.template import (
    TINY_HYPERPARAMETERS,
    assert_trained_job,
    hypertune_records,
    logged_steps,
    trainer_environment,
)

pytestmark = pytest.mark.slow

TRAIN_STEPS = 150


def test_single_replica_trains_checkpoints_reports_and_exports(tmp_path, digits, installed_trainer, launcher):
    job_dir = tmp_path / "job"
    metric_file = tmp_path / "hypertune" / "metrics"
    aip_model_dir = tmp_path / "aip-model"
    env = trainer_environment(
        PYTHONPATH=str(installed_trainer),
        CLOUD_ML_HP_METRIC_FILE=str(metric_file),
        AIP_MODEL_DIR=str(aip_model_dir),
    )
    args = [
        *digits.trainer_args(),
        *TINY_HYPERPARAMETERS,
        "--train-steps", str(TRAIN_STEPS),
        "--checkpoint-steps", "50",
        "--log-steps", "25",
        "--job-dir", str(job_dir),  # appended last, as the engine does
    ]
    # Run outside the checkout: only the installed copy can be imported.
    replica = launcher.start("single", args, env=env, cwd=tmp_path)
    assert launcher.wait(replica, timeout=180) == 0, launcher.dump()

    log = replica.log()
    assert "training mode single" in log
    assert f"trainer package {installed_trainer / 'trainer'}," in log
    assert logged_steps(log)[-1] == TRAIN_STEPS
    assert_trained_job(job_dir, TRAIN_STEPS, digits.eval_files)
    assert (aip_model_dir / "saved_model.pb").exists()

    records = hypertune_records(metric_file)
    steps = [int(record["global_step"]) for record in records]
    assert steps == [50, 100, 150], "one report per checkpoint, the last at the final step"
    assert all("accuracy" in record for record in records)
    assert float(records[-1]["accuracy"]) > 0.6
