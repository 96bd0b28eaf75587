"""`aiptrain jobs tensorboard`: a real TensorBoard process answering with a real job's scalars."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from aiptrain.cli.main import root

# Writes `loss` scalars with TensorBoard's own event writer (no TensorFlow needed), under --job-dir.
SUMMARY_TRAINER = """
import argparse, time
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

parser = argparse.ArgumentParser()
parser.add_argument("--job-dir")
parser.add_argument("--scale", type=float, default=1.0)  # a tuning job's hyperparameter
args, _ = parser.parse_known_args()
writer = EventFileWriter(args.job_dir)
for step, loss in enumerate([0.9, 0.5, 0.25]):
    value = summary_pb2.Summary.Value(tag="loss", simple_value=loss * args.scale)
    writer.add_event(event_pb2.Event(step=step, wall_time=time.time(), summary=summary_pb2.Summary(value=[value])))
writer.close()
print("wrote summaries to", args.job_dir, flush=True)
"""


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _summary_trainer(root: Path) -> Path:
    package = root / "proj" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(SUMMARY_TRAINER)
    return package


@contextmanager
def _tensorboard(job_id: str) -> Iterator[str]:
    """`aiptrain jobs tensorboard JOB --port 0` as a user runs it: yields the URL it prints, then
    stops it with Ctrl-C and checks it ended cleanly, saying which folder it served."""
    command = subprocess.Popen([sys.executable, "-m", "aiptrain", "jobs", "tensorboard", job_id, "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert command.stdout is not None
        url = command.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            command.wait(timeout=30)
            raise AssertionError(f"no URL printed: {command.stderr.read() if command.stderr else ''}")
        yield url
    finally:
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=30)
    assert command.returncode == 0, err
    assert f"/{job_id}" in err  # it says which folder it serves


def _losses(url: str, run: str) -> list[tuple[int, float]]:
    scalars = _get(url + f"data/plugin/scalars/scalars?run={run}&tag=loss")
    assert isinstance(scalars, list)
    return [(step, round(value, 3)) for _, step, value in scalars]


@pytest.mark.slow
def test_tensorboard_serves_the_jobs_scalars_from_the_local_store(tmp_path: Path) -> None:
    package = _summary_trainer(tmp_path)
    submit = CliRunner().invoke(root, ["jobs", "submit", "training", "tb_job", "--package-path", str(package),
                                       "--module-name", "trainer.task", "--region", "us-central1",
                                       "--job-dir", "gs://tb-bucket/tb_job", "--stream-logs"])
    assert submit.exit_code == 0, submit.stderr
    with _tensorboard("tb_job") as url:
        assert _get(url + "data/runs") == ["."]
        assert _losses(url, ".") == [(0, 0.9), (1, 0.5), (2, 0.25)]


@pytest.mark.slow
def test_each_trial_of_a_tuning_job_is_a_run(tmp_path: Path) -> None:
    package = _summary_trainer(tmp_path)
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
    with _tensorboard("tb_tuning") as url:
        runs = _get(url + "data/runs")
        assert isinstance(runs, list) and sorted(runs) == sorted(scale_of)  # one run per trial, named by its ID
        for run, scale in scale_of.items():
            assert _losses(url, run) == [(0, round(0.9 * scale, 3)), (1, round(0.5 * scale, 3)),
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
