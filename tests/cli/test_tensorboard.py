"""`aiptrain jobs tensorboard`: a real TensorBoard process answering with a real job's scalars."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
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
args, _ = parser.parse_known_args()
writer = EventFileWriter(args.job_dir)
for step, loss in enumerate([0.9, 0.5, 0.25]):
    value = summary_pb2.Summary.Value(tag="loss", simple_value=loss)
    writer.add_event(event_pb2.Event(step=step, wall_time=time.time(), summary=summary_pb2.Summary(value=[value])))
writer.close()
print("wrote summaries to", args.job_dir, flush=True)
"""


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_tensorboard_serves_the_jobs_scalars_from_the_local_store(tmp_path: Path) -> None:
    package = tmp_path / "proj" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(SUMMARY_TRAINER)
    submit = CliRunner().invoke(root, ["jobs", "submit", "training", "tb_job", "--package-path", str(package),
                                       "--module-name", "trainer.task", "--region", "us-central1",
                                       "--job-dir", "gs://tb-bucket/tb_job", "--stream-logs"])
    assert submit.exit_code == 0, submit.stderr
    command = subprocess.Popen([sys.executable, "-m", "aiptrain", "jobs", "tensorboard", "tb_job", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert command.stdout is not None
        url = command.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            command.wait(timeout=30)
            raise AssertionError(f"no URL printed: {command.stderr.read() if command.stderr else ''}")
        runs = _get(url + "data/runs")
        assert runs == ["."]
        scalars = _get(url + "data/plugin/scalars/scalars?run=.&tag=loss")
        assert isinstance(scalars, list)
        assert [(step, round(value, 3)) for _, step, value in scalars] == [(0, 0.9), (1, 0.5), (2, 0.25)]
    finally:
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=30)
    assert command.returncode == 0, err
    assert "tb-bucket/tb_job" in err  # it says which folder it serves


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
