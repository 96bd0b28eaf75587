"""Trials that report only through tf.summary are ranked by the last value of the tag, as on the service."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import JobState
from aiptrain._tuning.metrics import SummaryReadError, read_summary_metric
from tests.tuning.harness import PROJECT, TRAINERS, job_log, trials_of, tuning_job, wait_for_end

pytestmark = pytest.mark.slow


def _final(x: float) -> float:
    return 1.0 - (x - 0.3) ** 2


def test_trials_that_only_write_summaries_are_ranked_by_the_last_value(
    engine: LocalJobEngine, package_uri: str
) -> None:
    spec = {
        "goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "algorithm": "GRID_SEARCH",
        "maxTrials": 2, "maxParallelTrials": 2,  # trial 1 is x=0.1: the ranking must put trial 2 first
        "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.1, 0.3]}],
    }
    engine.submit(PROJECT, tuning_job("summaries", package_uri, spec, pythonModule="hptrainer.summaries"))
    done = wait_for_end(engine, "summaries", timeout=600)
    assert done.state == JobState.SUCCEEDED, job_log(engine, "summaries")
    trials = trials_of(done)
    by_x = {float((t.hyperparameters or {})["x"]): t for t in trials}
    assert sorted(by_x) == [0.1, 0.3]
    for x, trial in by_x.items():
        assert trial.final_metric is not None, job_log(engine, "summaries")
        assert trial.final_metric.training_step == 2
        assert trial.final_metric.objective_value == pytest.approx(_final(x), abs=1e-6)
    assert float((trials[0].hyperparameters or {})["x"]) == 0.3, "the best trial comes first"
    assert "using the last value in its summary events" in job_log(engine, "summaries")


def _write_events(directory: Path, x: float) -> None:
    env = {**os.environ, "PYTHONPATH": str(TRAINERS), "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-m", "hptrainer.summaries", "--job-dir", str(directory), "--x", str(x)],
                   env=env, check=True, timeout=300, capture_output=True)


def test_the_reader_takes_the_last_value_of_the_tag_and_explains_failures(tmp_path: Path) -> None:
    _write_events(tmp_path / "trial", 0.5)
    env = dict(os.environ)
    report = read_summary_metric(sys.executable, str(tmp_path / "trial"), "accuracy", env)
    assert report is not None
    # pytest.approx compares equal to the float, which mypy cannot see inside a tuple.
    assert (report.step, report.value) == (2, pytest.approx(_final(0.5), abs=1e-6))  # type: ignore[comparison-overlap]
    loss = read_summary_metric(sys.executable, str(tmp_path / "trial"), "loss", env)
    assert loss is not None and (loss.step, loss.value) == (2, 12.0)
    assert read_summary_metric(sys.executable, str(tmp_path / "trial"), "no_such_tag", env) is None
    assert read_summary_metric(sys.executable, str(tmp_path / "missing"), "accuracy", env) is None
    # An interpreter without TensorFlow cannot read them: the error says why.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    with pytest.raises(SummaryReadError, match="No module named 'tensorflow'"):
        read_summary_metric(str(bare), str(tmp_path / "trial"), "accuracy", env)
