"""Trainers written for the service's runtimes, submitted with plain command lines, run in the
runtime environments (built once per session) and succeed; what cannot work fails clearly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aiptrain.replicas.envs.store import Environment

from .conftest import TRAINERS, aiptrain, describe, job_log, submit, wait_for_end

pytestmark = pytest.mark.slow


def _storage(home: Path, bucket: str, *parts: str) -> Path:
    return home.joinpath("storage", bucket, *parts)


def test_compat_v1_estimator_runs_as_standard_1_on_runtime_2_4(runtime_envs: Path, home: Path,
                                                                  built_environment: Environment) -> None:
    result = submit("estimator_v1", "estimator_v1", "--runtime-version", "2.4", "--scale-tier", "STANDARD_1",
                    "--job-dir", "gs://envtests/estimator")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    logs = result.stdout + result.stderr
    # Every replica of STANDARD_1 started, in the runtime environment, with the substitution said.
    for task in ("master-replica-0", *(f"worker-replica-{i}" for i in range(4)),
                 *(f"ps-replica-{i}" for i in range(3))):
        assert f"Starting {task}: {built_environment.python} -m trainer.task" in logs
    assert "Runtime version 2.4 shipped TensorFlow 2.4 for Python 3.7; here it runs TensorFlow 2.15.1" in logs
    assert "estimator chief 0 finished on TensorFlow 2.15.1" in logs
    checkpoint = _storage(home, "envtests", "estimator", "model", "checkpoint").read_text()
    last = re.search(r'^model_checkpoint_path: "model.ckpt-(\d+)"', checkpoint, re.MULTILINE)
    assert last and int(last.group(1)) >= 30, checkpoint  # asynchronous workers may add a step or two


def test_keras2_lambda_over_dense_features_on_runtime_2_1(runtime_envs: Path, home: Path) -> None:
    result = submit("keras2", "keras2_lambda", "--runtime-version", "2.1", "--job-dir", "gs://envtests/keras2")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(_storage(home, "envtests", "keras2", "result.json").read_text())
    assert report["keras"].startswith("2.15"), report
    assert report["lambda_width"] == 4  # the Lambda's output shape was inferred: [a, b, a^2, b^2]


def test_pandas_sklearn_trainer_gets_its_setup_py_dependencies_on_runtime_1_15(runtime_envs: Path,
                                                                                home: Path) -> None:
    result = submit("sklearn", "sklearn_deps", "--runtime-version", "1.15", "--job-dir", "gs://envtests/sk")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(_storage(home, "envtests", "sk", "result.json").read_text())
    assert report["accuracy"] == 1.0
    # tabulate came from setup.py into the job's own site; pandas/sklearn are the runtime's, not copies.
    site = Path(report["tabulate_file"]).parent.parent  # .../site/tabulate/__init__.py
    assert site.name == "site" and (site / "tabulate-0.9.0.dist-info").is_dir()
    assert not list(site.glob("pandas*")) and not list(site.glob("scikit_learn*"))
    assert report["pandas"] == "2.1.4" and report["sklearn"] == "1.3.2"
    logs = result.stdout + result.stderr
    assert "already in the runtime: " in logs and "pandas" in logs


def test_xgboost_trainer_tunes_in_the_runtime_environment(runtime_envs: Path, tmp_path: Path) -> None:
    config = tmp_path / "hptuning.yaml"
    config.write_text(
        "trainingInput:\n"
        "  hyperparameters:\n"
        "    goal: MINIMIZE\n"
        "    hyperparameterMetricTag: rmse\n"
        "    maxTrials: 2\n"
        "    maxParallelTrials: 1\n"
        "    params:\n"
        "    - parameterName: max-depth\n"
        "      type: DISCRETE\n"
        "      discreteValues: [1, 3]\n"
    )
    result = submit("xgb", "xgb_tuning", "--runtime-version", "1.15", "--config", str(config),
                    "--job-dir", "gs://envtests/xgb")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    trials = describe("xgb")["trainingOutput"]["trials"]
    assert len(trials) == 2
    depths = sorted(trial["hyperparameters"]["max-depth"] for trial in trials)
    assert depths == ["1", "3"]
    assert all(trial["finalMetric"]["objectiveValue"] > 0 for trial in trials)
    assert "xgboost 1.7.6 max_depth=3" in result.stdout + result.stderr


def test_unmeetable_install_requires_fails_in_preparing_and_leaves_nothing(runtime_envs: Path,
                                                                           home: Path) -> None:
    result = submit("unmeetable", "unmeetable", "--runtime-version", "2.11", "--job-dir", "gs://envtests/un")
    assert result.returncode == 10, result.stdout[-3000:] + result.stderr[-3000:]
    job = describe("unmeetable")
    message = job["errorMessage"]
    assert message.startswith("Installing the trainer package unmeetable_trainer-0.1.tar.gz with its dependencies "
                              "failed: No solution found"), message
    assert "scikit-learn==0.0.99" in message and "Hint:" in message and "install_requires" in message
    assert "this trainer must never start" not in result.stdout + result.stderr
    assert "Job RUNNING." not in result.stdout + result.stderr
    cache = home / "cache" / "site"
    assert not cache.exists() or list(cache.iterdir()) == []  # no entry, no half-built staging
    assert not list((home / "jobs").glob("*/unmeetable/site/*"))


def test_retired_runtime_1_10_is_accepted_with_its_warning(runtime_envs: Path, home: Path) -> None:
    result = submit("retired", "compat_v1", "--runtime-version", "1.10", "--job-dir", "gs://envtests/retired")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "warning: runtime version 1.10 was retired by AI Platform Training" in result.stderr
    logs = job_log("retired")
    assert "WARNING" in logs and "Runtime version 1.10 was retired" in logs
    assert "TF-1-only modules (tf.contrib" in logs
    assert _storage(home, "envtests", "retired", "sum.txt").read_text().startswith("42 2.15.1")
    described = aiptrain("jobs", "describe", "retired")
    assert "Runtime version 1.10 shipped TensorFlow 1.10 for Python 2.7/3.5; here it runs TensorFlow 2.15.1" \
        in described.stderr
    assert "warning: runtime version 1.10 was retired" in described.stderr


def test_two_jobs_started_at_once_share_one_environment_build(runtime_envs: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = tmp_path / "fresh-envs"  # nothing built yet (uv's cache is warm from the session's build)
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(fresh))
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "2")
    for job_id in ("shared_a", "shared_b"):
        submitted = submit(job_id, "compat_v1", "--runtime-version", "2.11", "--job-dir", f"gs://envtests/{job_id}",
                           stream=False)
        assert submitted.returncode == 0, submitted.stderr
    jobs = [wait_for_end(job_id) for job_id in ("shared_a", "shared_b")]
    assert [job["state"] for job in jobs] == ["SUCCEEDED", "SUCCEEDED"], jobs
    logs = [job_log(job_id) for job_id in ("shared_a", "shared_b")]
    assert sum(log.count("Building runtime 2.11: tensorflow-cpu 2.15.1") for log in logs) == 1, logs
    assert len([p for p in fresh.iterdir() if not p.name.startswith(".")]) == 1


def test_local_train_runs_in_the_runtime_environment(runtime_envs: Path, built_environment: Environment,
                                                     tmp_path: Path) -> None:
    result = aiptrain("local", "train", "--package-path", str(TRAINERS / "compat_v1" / "trainer"),
                      "--module-name", "trainer.task", "--runtime-version", "1.15", "--job-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"[aiptrain] Starting master-replica-0: {built_environment.python} -m trainer.task" in result.stderr
    assert "[aiptrain] Runtime version 1.15 shipped TensorFlow 1.15" in result.stderr
    assert (tmp_path / "out" / "sum.txt").read_text().startswith("42 2.15.1")
