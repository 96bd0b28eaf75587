"""Chief + 2 workers + 1 parameter server: ParameterServerStrategy with the chief as coordinator."""

from __future__ import annotations

import re

import pytest

from tests.fixtures.template import (
    TINY_HYPERPARAMETERS,
    assert_trained_job,
    hypertune_records,
    logged_steps,
    loopback_cluster,
    tf_config,
    trainer_environment,
)

pytestmark = pytest.mark.slow

TRAIN_STEPS = 120


def test_chief_coordinates_workers_and_parameter_server(tmp_path, digits, launcher):
    cluster = loopback_cluster(chief=1, worker=2, ps=1)
    job_dir = tmp_path / "job"
    metric_file = tmp_path / "chief.metrics"
    args = [
        *digits.trainer_args(),
        *TINY_HYPERPARAMETERS,
        "--train-steps", str(TRAIN_STEPS),
        "--checkpoint-steps", "40",
        "--log-steps", "20",
        f"--job-dir={job_dir}",
    ]
    servers = []
    for task_type, index in (("ps", 0), ("worker", 0), ("worker", 1)):
        env = trainer_environment(TF_CONFIG=tf_config(cluster, task_type, index, environment="cloud"))
        servers.append(launcher.start(f"{task_type}-{index}", args, env=env))
    chief_env = trainer_environment(
        TF_CONFIG=tf_config(cluster, "chief", 0, environment="cloud"),
        CLOUD_ML_HP_METRIC_FILE=str(metric_file),
    )
    chief = launcher.start("chief-0", args, env=chief_env)

    assert launcher.wait(chief, timeout=200) == 0, launcher.dump()
    # Workers and parameter servers serve until the engine stops them.
    assert all(server.process.poll() is None for server in servers), launcher.dump()
    for server in servers:
        assert "serving for the coordinator" in server.log(), launcher.dump()

    log = chief.log()
    assert "training mode parameter_server" in log
    assert "ParameterServerStrategy" in log
    assert logged_steps(log)[-1] == TRAIN_STEPS

    plans = dict(re.findall(r"\] (worker:\d) seed \d+ reads \d file\(s\), first epoch order: (.+)", log))
    assert set(plans) == {"worker:0", "worker:1"}
    files = [set(plans[name].split(", ")) for name in ("worker:0", "worker:1")]
    assert files[0].isdisjoint(files[1])
    assert files[0] | files[1] == {str(path) for path in digits.train_files}

    assert_trained_job(job_dir, TRAIN_STEPS, digits.eval_files)
    assert [int(r["global_step"]) for r in hypertune_records(metric_file)] == [40, 80, 120]
    assert not list(job_dir.glob("scratch-*")), "only the coordinator saves under parameter server training"
