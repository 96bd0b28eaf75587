"""The trainer template tuned on the digits with its own hptuning_config.yaml, through the real CLI.

Tiny settings (a few steps, BASIC tier, 4 trials, 2 at a time) keep TensorFlow's share small;
the point is that the template and the engine agree: each trial gets its hyperparameters as
flags argparse accepts, writes under JOB_DIR/TRIAL once, and reports `accuracy`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._cli.main import root
from aiptrain._job.spec import JobState
from tests.tuning.harness import PROJECT, job_log, trials_of

pytestmark = pytest.mark.slow

TEMPLATE = Path(__file__).resolve().parents[2] / "trainer_template"
TRAIN_STEPS = 30


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("digits")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "TF_CONFIG"}}
    subprocess.run([sys.executable, "-m", "trainer.make_data", "--output-dir", str(directory), "--shards", "2"],
                   cwd=TEMPLATE, env=env, check=True, capture_output=True, timeout=120)
    return directory


def test_template_tuned_for_four_trials(digits: Path, tmp_path: Path, home: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        monkeypatch.setenv(name, "1")  # two trials share two cores
    config = yaml.safe_load((TEMPLATE / "hptuning_config.yaml").read_text())
    tuning = config["trainingInput"]["hyperparameters"]
    tuning.update(maxTrials=4, maxParallelTrials=2)
    config_path = tmp_path / "hptuning.yaml"
    config_path.write_text(yaml.safe_dump(config))

    result = CliRunner().invoke(root, [
        "jobs", "submit", "training", "tuned", "--project", PROJECT,
        "--package-path", str(TEMPLATE / "trainer"), "--module-name", "trainer.task",
        "--region", "us-central1", "--config", str(config_path), "--job-dir", "gs://tuning/tuned",
        "--stream-logs", "--timeout", "600",
        "--", "--train-files", str(digits / "train-*.csv"), "--eval-files", str(digits / "eval-*.csv"),
        "--train-steps", str(TRAIN_STEPS), "--checkpoint-steps", "15", "--log-steps", "15",
        "--throttle-secs", "0",
    ], catch_exceptions=False)
    engine = LocalJobEngine(home)
    assert result.exit_code == 0, job_log(engine, "tuned")[-6000:]

    job = engine.get(PROJECT, "tuned")
    assert job.state == JobState.SUCCEEDED
    trials = trials_of(job)
    assert sorted(t.trial_id or "" for t in trials) == ["1", "2", "3", "4"]
    job_dir = home / "storage" / "tuning" / "tuned"
    for trial in trials:
        assert trial.state == JobState.SUCCEEDED
        given = trial.hyperparameters or {}
        assert 0.0005 <= float(given["learning-rate"]) <= 0.05
        assert given["batch-size"] in {"32", "64", "128"}
        assert 16 <= int(given["hidden-units"]) <= 128
        metric = trial.final_metric
        assert metric is not None and metric.objective_value is not None and 0.0 <= metric.objective_value <= 1.0
        trial_dir = job_dir / (trial.trial_id or "")
        assert (trial_dir / "checkpoints").is_dir()
        assert not (trial_dir / (trial.trial_id or "")).exists()  # the trial number is not appended twice
        if not trial.is_trial_stopped_early:
            assert metric.training_step == TRAIN_STEPS
            assert (trial_dir / "model" / "saved_model.pb").exists()  # AIP_MODEL_DIR of the trial
    assert job.training_output is not None and job.training_output.hyperparameter_metric_tag == "accuracy"
    assert "Tuning finished: 4 trials" in result.stderr
