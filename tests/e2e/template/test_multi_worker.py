"""Master + worker under MultiWorkerMirroredStrategy, with an evaluator, from a service-style TF_CONFIG."""

from __future__ import annotations

import json
import signal

import pytest

from tests.fixtures.template import (
    TINY_HYPERPARAMETERS,
    assert_trained_job,
    checkpoint_steps,
    first_batch_fingerprint,
    first_epoch_files,
    hypertune_records,
    logged_steps,
    logged_value,
    loopback_cluster,
    summary_tags,
    tf_config,
    trainer_environment,
    wait_for,
)

pytestmark = pytest.mark.slow

TRAIN_STEPS = 120
TRIAL = "2"


def service_tf_config(cluster: dict[str, list[str]], task_type: str, index: int) -> str:
    """What AI Platform Training gave each replica: ``master``, the TrainingInput, a trial number."""
    return json.dumps({
        "cluster": cluster,
        "task": {"type": task_type, "index": index, "trial": TRIAL},
        "job": {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": "1", "evaluatorCount": "1"},
        "environment": "cloud",
    })


def test_master_and_worker_train_in_lockstep_with_an_evaluator(tmp_path, digits, launcher):
    cluster = loopback_cluster(master=1, worker=1)
    job_dir = tmp_path / "job"
    model_dir = job_dir / TRIAL
    args = [
        *digits.trainer_args(),
        *TINY_HYPERPARAMETERS,
        "--train-steps", str(TRAIN_STEPS),
        "--checkpoint-steps", "40",
        "--log-steps", "20",
        "--job-dir", str(job_dir),
    ]
    metric_files = {}
    replicas = {}
    for task_type, index in (("master", 0), ("worker", 0), ("evaluator", 0)):
        metric_files[task_type] = tmp_path / f"{task_type}.metrics"
        env = trainer_environment(
            TF_CONFIG=service_tf_config(cluster, task_type, index),
            CLOUD_ML_HP_METRIC_FILE=str(metric_files[task_type]),
        )
        replicas[task_type] = launcher.start(f"{task_type}-{index}", args, env=env)

    assert launcher.wait(replicas["worker"], timeout=180) == 0, launcher.dump()
    # The worker stays until the master has evaluated and exported (a last all-reduce): one that
    # left earlier would make TensorFlow's coordination service on the master log heartbeat errors.
    assert "training complete at step" in replicas["master"].log(), launcher.dump()
    for name in ("master", "evaluator"):
        assert launcher.wait(replicas[name], timeout=180) == 0, launcher.dump()

    master_log, worker_log = replicas["master"].log(), replicas["worker"].log()
    evaluator_log = replicas["evaluator"].log()
    assert "training mode multi_worker" in master_log
    assert "[chief:0]" in master_log, "the service's master is trained as TensorFlow's chief"
    assert "MultiWorkerMirroredStrategy" in master_log
    assert logged_steps(master_log)[-1] == TRAIN_STEPS
    assert logged_steps(worker_log)[-1] == TRAIN_STEPS

    # Each worker read its own shard, in its own order, starting from a different batch.
    master_files, worker_files = first_epoch_files(master_log), first_epoch_files(worker_log)
    assert set(master_files).isdisjoint(worker_files)
    assert set(master_files) | set(worker_files) == {str(path) for path in digits.train_files}
    assert first_batch_fingerprint(master_log) != first_batch_fingerprint(worker_log)

    # Outputs land in the trial's directory; the worker's private checkpoints are gone.
    assert_trained_job(model_dir, TRAIN_STEPS, digits.eval_files)
    assert not list(model_dir.glob("scratch-*"))
    assert [int(r["global_step"]) for r in hypertune_records(metric_files["master"])][-1] == TRAIN_STEPS
    assert not metric_files["worker"].exists()

    # The evaluator followed the checkpoints and stopped by itself after the final one.
    assert f"evaluated the final checkpoint (step {TRAIN_STEPS})" in evaluator_log
    assert max(summary_tags(model_dir / "logs" / "evaluator")["accuracy"]) == TRAIN_STEPS


def test_sigterm_to_one_worker_stops_both_at_the_same_checkpoint(tmp_path, digits, launcher):
    """The stop decision travels in the all-reduce: no replica is left waiting on a collective."""
    cluster = loopback_cluster(chief=1, worker=1)
    job_dir = tmp_path / "job"
    args = [
        *digits.trainer_args(),
        *TINY_HYPERPARAMETERS,
        "--train-steps", "1000000",
        "--checkpoint-steps", "1000000",
        "--log-steps", "10",
        "--job-dir", str(job_dir),
    ]
    chief = launcher.start("chief-0", args, env=trainer_environment(TF_CONFIG=tf_config(cluster, "chief", 0)))
    worker = launcher.start("worker-0", args, env=trainer_environment(TF_CONFIG=tf_config(cluster, "worker", 0)))
    wait_for(lambda: logged_steps(worker.log()) or worker.process.poll() is not None, timeout=150,
             what="synchronous training to start")
    worker.process.send_signal(signal.SIGTERM)

    assert launcher.wait(worker, timeout=60) == 128 + signal.SIGTERM, launcher.dump()
    assert launcher.wait(chief, timeout=60) == 128 + signal.SIGTERM, launcher.dump()
    stopped = [int(logged_value(replica.log(), r"stopped at step (\d+) after SIGTERM")) for replica in (chief, worker)]
    assert stopped[0] == stopped[1]
    assert checkpoint_steps(job_dir) == [stopped[0]]
    assert not list(job_dir.glob("scratch-*"))
