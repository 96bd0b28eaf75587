"""A hyperparameter tuning job on the real two-node cluster: the local engine's study, with each
trial a replica set of its own on the cluster, and the trials in `jobs describe`."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from aiptrain._backends.ray.client import LogTail
from tests.backends.ray.harness import actor_nodes, aiptrain, backend, cluster_node_ids, log_text
from tests.fixtures.engine import max_overlap
from tests.tuning.harness import TRAINERS
from tests.tuning.trainers.hptrainer.objective import objective

pytestmark = pytest.mark.ray_cluster

X_VALUES = [0.1, 0.3, 0.5, 0.7]


def test_a_tuning_job_runs_its_trials_on_the_cluster_two_at_a_time(on_cluster, tmp_path):
    job_id = "ray_tuning"
    config = tmp_path / "hptuning.yaml"
    config.write_text(yaml.safe_dump({"trainingInput": {"hyperparameters": {
        "goal": "MAXIMIZE", "algorithm": "GRID_SEARCH", "maxTrials": 4, "maxParallelTrials": 2,
        "hyperparameterMetricTag": "accuracy",
        "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": X_VALUES}],
    }}}))
    result = aiptrain(
        "jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
        "--package-path", str(TRAINERS / "hptrainer"), "--module-name", "hptrainer.task",
        "--runtime-version", "2.11", "--scale-tier", "basic", "--ray-resource-scale", "0.25",
        "--config", str(config), "--job-dir", f"gs://ray-jobs/{job_id}", "--stream-logs",
        "--", "--steps", "3", "--step-seconds", "1", "--tag", "accuracy")
    assert result.returncode == 0, result.stderr[-4000:]
    described = aiptrain("jobs", "describe", job_id, "--backend", "ray", "--format", "json")
    assert described.returncode == 0, described.stderr
    job = json.loads(described.stdout)
    assert job["state"] == "SUCCEEDED"
    output = job["trainingOutput"]
    assert output["isHyperparameterTuningJob"] is True
    assert output["hyperparameterMetricTag"] == "accuracy"
    assert output["completedTrialCount"] == "4"
    trials = output["trials"]
    assert sorted(float(t["hyperparameters"]["x"]) for t in trials) == X_VALUES
    # Best first, each with the metric its trainer reported through cloudml-hypertune at its last step.
    values = [t["finalMetric"]["objectiveValue"] for t in trials]
    assert values == sorted(values, reverse=True)
    for trial in trials:
        assert trial["state"] == "SUCCEEDED"
        assert trial["finalMetric"]["trainingStep"] == "3"
        assert abs(trial["finalMetric"]["objectiveValue"] - objective(float(trial["hyperparameters"]["x"]), 0, "a")) \
            < 1e-9
    assert float(trials[0]["hyperparameters"]["x"]) == 0.3
    assert "Tuning finished: 4 trials, 4 succeeded; best trial" in result.stderr
    # Machine lines stay out of the log people read.
    assert "Training output:" not in result.stderr and "Training output:" not in log_text(on_cluster, job_id)
    assert "WebSocket closed" not in result.stderr  # Ray's own chatter about the log tail stays quiet
    # Followed live (a websocket tail of the Ray job's log after the first read), the stream has
    # every line of the whole log, in order; and the tail itself gives exactly the whole read.
    whole = backend(on_cluster).read_logs(job_id, limit=100000)
    position = 0
    for entry in whole:
        found = result.stderr.find(entry.message, position)
        assert found >= 0, f"missing from the stream: {entry.message!r}"
        position = found + len(entry.message)
    details = backend(on_cluster).client.get_job_info(job_id)
    tail = LogTail(backend(on_cluster).client, job_id, datetime.fromtimestamp(details.start_time / 1000, UTC))
    assert tail.done.wait(60) and not tail.failed
    assert [e for e in tail.entries() if "Training output:" not in e.message] == whole

    # Each trial ran on the cluster as a replica set of its own: its TF_CONFIG names the trial,
    # its --job-dir is JOB_DIR/TRIAL, and at most two ran at once.
    storage = Path(os.environ["AIPTRAIN_HOME"]) / "storage" / "ray-jobs" / job_id
    records = {path.parent.name: json.loads(path.read_text()) for path in storage.glob("*/record.json")}
    assert sorted(records) == ["1", "2", "3", "4"]
    for trial_id, record in records.items():
        assert record["tf_config"]["task"]["trial"] == trial_id
        assert record["trial"] == trial_id
        assert record["job_dir"] == str(storage / trial_id)
    assert max_overlap([(r["start"], r["end"]) for r in records.values()]) == 2
    nodes = {node for trial_id in records
             for node in actor_nodes(on_cluster, job_id, ["master-replica-0"], trial_id).values()}
    assert nodes <= cluster_node_ids(on_cluster)
