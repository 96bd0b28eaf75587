"""The trainer's command line: Estimator-era flags, strict parsing, and where output goes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.template import TEMPLATE_DIR, trainer_environment

REQUIRED = ["--train-files", "t.csv", "--eval-files", "e.csv"]


def test_defaults_and_job_dir_spellings(template_module):
    task = template_module("task")
    parser = task.build_parser()
    args = parser.parse_args([*REQUIRED, "--job-dir=/tmp/a"])
    assert args.job_dir == "/tmp/a"
    assert args.metric_tag == "accuracy"
    assert parser.parse_args([*REQUIRED, "--job-dir", "/tmp/b"]).job_dir == "/tmp/b"
    assert parser.parse_args(REQUIRED).job_dir is None


def test_hyperparameters_parse(template_module):
    task = template_module("task")
    args = task.build_parser().parse_args([
        *REQUIRED, "--learning-rate", "0.05", "--batch-size=16", "--train-steps", "7",
        "--hidden-units", "128,64", "--checkpoint-steps", "3", "--eval-steps", "2", "--metric-tag", "acc",
    ])
    assert (args.learning_rate, args.batch_size, args.train_steps) == (0.05, 16, 7)
    assert args.hidden_units == [128, 64]
    assert (args.checkpoint_steps, args.eval_steps, args.metric_tag) == (3, 2, "acc")


@pytest.mark.parametrize(
    "extra",
    [["--no-such-flag", "1"], ["--learning"], ["--hidden-units", "64,x"], ["--train-steps", "0"], ["stray"]],
)
def test_bad_arguments_are_usage_errors(template_module, extra, capsys):
    task = template_module("task")
    with pytest.raises(SystemExit) as exit_info:
        task.build_parser().parse_args([*extra, *REQUIRED])
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err


def _run_trainer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainer.task", *args],
        cwd=TEMPLATE_DIR,
        env=trainer_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_unknown_argument_fails_the_process_fast():
    completed = _run_trainer(*REQUIRED, "--bogus", "1")
    assert completed.returncode == 2
    assert "unrecognized arguments: --bogus 1" in completed.stderr


def test_input_patterns_that_match_nothing_fail_fast(digits, tmp_path):
    completed = _run_trainer("--train-files", digits.train_pattern, "--eval-files", str(tmp_path / "none-*.csv"))
    assert completed.returncode == 2
    assert f"--eval-files: no file matches {tmp_path / 'none-*.csv'}" in completed.stderr
    assert "tensorflow" not in completed.stderr.lower(), "the check runs before TensorFlow is imported"


def test_model_dir_per_trial_and_vertex_fallback(template_module):
    task = template_module("task")
    cluster = template_module("cluster")
    trial = cluster.ClusterRole(mode=cluster.SINGLE, trial="4")
    plain = cluster.ClusterRole(mode=cluster.SINGLE)
    assert task.model_dir_for("/jobs/j1", trial, {}) == "/jobs/j1/4"
    assert task.model_dir_for("/jobs/j1", plain, {}) == "/jobs/j1"
    assert task.model_dir_for(None, plain, {"AIP_MODEL_DIR": "/out/7/model/"}) == "/out/7"
    temporary = Path(task.model_dir_for(None, plain, {}))
    assert temporary.is_dir()
    temporary.rmdir()


def test_replicas_of_one_cluster_share_a_default_model_dir(template_module):
    """Without --job-dir, the evaluator and the workers must still find the chief's checkpoints."""
    task = template_module("task")
    cluster = template_module("cluster")
    spec = {"master": ["localhost:1"], "worker": ["localhost:2"]}
    roles = [
        cluster.parse_tf_config(json.dumps({"cluster": spec, "task": {"type": task_type, "index": 0}}))
        for task_type in ("master", "worker", "evaluator")
    ]
    directories = {task.model_dir_for(None, role, {}) for role in roles}
    assert len(directories) == 1
    other = cluster.parse_tf_config(json.dumps({"cluster": {**spec, "worker": ["localhost:3"]},
                                                "task": {"type": "master", "index": 0}}))
    assert task.model_dir_for(None, other, {}) not in directories
