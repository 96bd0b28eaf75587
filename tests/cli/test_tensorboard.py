"""`aiptrain jobs tensorboard`: a real TensorBoard process answering with a real job's scalars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aiptrain._cli.main import root
from tests.fixtures.tensorboard import LOSSES, get_json, losses, summary_trainer, tensorboard_command


@pytest.mark.slow
def test_tensorboard_serves_the_jobs_scalars_from_the_local_store(tmp_path: Path) -> None:
    package = summary_trainer(tmp_path)
    submit = CliRunner().invoke(root, ["jobs", "submit", "training", "tb_job", "--package-path", str(package),
                                       "--module-name", "trainer.task", "--region", "us-central1",
                                       "--job-dir", "gs://tb-bucket/tb_job", "--stream-logs"])
    assert submit.exit_code == 0, submit.stderr
    with tensorboard_command("tb_job") as url:
        assert get_json(url + "data/runs") == ["."]
        assert losses(url, ".") == LOSSES


@pytest.mark.slow
def test_each_trial_of_a_tuning_job_is_a_run(tmp_path: Path) -> None:
    package = summary_trainer(tmp_path)
    config = tmp_path / "tuning.yaml"
    config.write_text(json.dumps({"trainingInput": {"hyperparameters": {
        "goal": "MINIMIZE", "hyperparameterMetricTag": "loss", "maxTrials": 2, "maxParallelTrials": 1,
        "algorithm": "GRID_SEARCH",
        "params": [{"parameterName": "scale", "type": "DISCRETE", "discreteValues": [1, 2]}]}}}))
    submit = CliRunner().invoke(root, ["jobs", "submit", "training", "tb_tuning", "--package-path", str(package),
                                       "--module-name", "trainer.task", "--region", "us-central1",
                                       "--config", str(config), "--job-dir", "gs://tb-bucket/tb_tuning",
                                       "--stream-logs"])
    assert submit.exit_code == 0, submit.stderr
    described = CliRunner().invoke(root, ["jobs", "describe", "tb_tuning", "--format", "json"])
    assert described.exit_code == 0, described.stderr
    trials = json.loads(described.stdout)["trainingOutput"]["trials"]
    scale_of = {trial["trialId"]: float(trial["hyperparameters"]["scale"]) for trial in trials}
    assert sorted(scale_of.values()) == [1.0, 2.0]
    with tensorboard_command("tb_tuning") as url:
        runs = get_json(url + "data/runs")
        assert isinstance(runs, list) and sorted(runs) == sorted(scale_of)  # one run per trial, named by its ID
        for run, scale in scale_of.items():
            assert losses(url, run) == [(0, round(0.9 * scale, 3)), (1, round(0.5 * scale, 3)),
                                        (2, round(0.25 * scale, 3))]


def test_a_job_without_a_job_dir_is_refused(trainer: Path) -> None:
    submit = CliRunner().invoke(root, ["jobs", "submit", "training", "no_dir", "--package-path", str(trainer),
                                       "--module-name", "trainer.task", "--region", "us-central1"])
    assert submit.exit_code == 0, submit.stderr
    result = CliRunner().invoke(root, ["jobs", "tensorboard", "no_dir"])
    assert result.exit_code == 2
    assert "has no job dir" in result.stderr


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_a_bad_port_is_a_usage_error(port: str) -> None:
    result = CliRunner().invoke(root, ["jobs", "tensorboard", "x", "--port", port])
    assert result.exit_code == 2
