"""Trainers written in each runtime era's idiom, submitted with plain command lines, run on their
runtime's own TensorFlow, packages and Python and succeed; what the service refused fails in
PREPARING with one clear line; without the runtime's Python the job falls back, and says so (a
Python 2.7 job only when AIPTRAIN_PYTHON2_MISSING allows it)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from aiptrain._environments import interpreters
from aiptrain._environments.release_dates import DATES_DIRECTORY
from aiptrain._environments.resolution import PYTHON2_MISSING_SETTING
from aiptrain._environments.store import Environment

from .conftest import TRAINERS, aiptrain, describe, job_log, submit, wait_for_end

pytestmark = [pytest.mark.slow, pytest.mark.runtime_envs]


def _storage(home: Path, bucket: str, *parts: str) -> Path:
    return home.joinpath("storage", bucket, *parts)


def _logs(result: object) -> str:
    return str(getattr(result, "stdout", "")) + str(getattr(result, "stderr", ""))


def test_tf1_estimator_with_hparams_and_app_flags_runs_as_standard_1_on_runtime_1_15(
        runtime_envs: Path, home: Path, built_environment: Environment) -> None:
    result = submit("tf1_estimator", "tf1_estimator", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--scale-tier", "STANDARD_1", "--job-dir", "gs://envtests/tf1")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    for task in ("master-replica-0", *(f"worker-replica-{i}" for i in range(4)),
                 *(f"ps-replica-{i}" for i in range(3))):
        assert f"Starting {task}: {built_environment.python} -m trainer.task" in logs
    assert "Runtime version 1.15 with Python 3.7: TensorFlow 1.15.0 on Python 3.7 (" in logs
    # setup.py's tensorflow==1.15.2 pin was installed over the image's 1.15.0, as pip did; it runs.
    assert "tf1 estimator master 0 finished on TensorFlow 1.15.2" in logs
    # TensorFlow 1.15 trusts only the system's CA bundle; its replicas see it extended with the
    # storage endpoint's CA, so its --job-dir stays gs:// and the checkpoints went through gs://.
    assert "-m trainer.task --job-dir gs://envtests/tf1" in logs and "trusts only the system's" not in logs
    assert list((home / "jobs").glob("*/tf1_estimator/site/tensorflow-1.15.2.dist-info"))
    checkpoint = _storage(home, "envtests", "tf1", "model", "checkpoint").read_text()
    last = re.search(r'^model_checkpoint_path: "model.ckpt-(\d+)"', checkpoint, re.MULTILINE)
    assert last and int(last.group(1)) >= 30, checkpoint


def test_keras_trainer_written_for_runtime_2_1_runs_on_python_3_7(runtime_envs: Path, home: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Submitted from a process that imported TensorFlow 2 (a notebook, a test): TensorFlow set
    # TF2_BEHAVIOR=1 there, which the service's VMs never had; it must not reach the replicas.
    monkeypatch.setenv("TF2_BEHAVIOR", "1")
    result = submit("keras21", "keras2_lambda", "--runtime-version", "2.1", "--python-version", "3.7",
                    "--job-dir", "gs://envtests/keras21")
    assert result.returncode == 0, _logs(result)[-4000:]
    report = json.loads(_storage(home, "envtests", "keras21", "result.json").read_text())
    assert report["tensorflow"] == "2.1.0" and report["keras"] == "2.2.4-tf", report  # its bundled Keras 2
    assert report["lambda_width"] == 4  # the Lambda's output shape was inferred: [a, b, a^2, b^2]


def test_sklearn_trainer_with_era_pins_and_joblib_tunes_on_runtime_1_15(runtime_envs: Path, home: Path,
                                                                          tmp_path: Path) -> None:
    config = tmp_path / "hptuning.yaml"
    config.write_text(
        "trainingInput:\n"
        "  hyperparameters:\n"
        "    goal: MAXIMIZE\n"
        "    algorithm: GRID_SEARCH\n"
        "    hyperparameterMetricTag: accuracy\n"
        "    maxTrials: 2\n"
        "    maxParallelTrials: 1\n"
        "    params:\n"
        "    - parameterName: C\n"
        "      type: DISCRETE\n"
        "      discreteValues: [0.5, 2]\n"
    )
    result = submit("sk115", "sklearn_1_15", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--config", str(config), "--job-dir", "gs://envtests/sk115")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    trials = describe("sk115")["trainingOutput"]["trials"]
    assert sorted(trial["hyperparameters"]["C"] for trial in trials) == ["0.5", "2"]
    assert all(trial["finalMetric"]["objectiveValue"] == 1.0 for trial in trials), trials
    for trial in ("1", "2"):
        report = json.loads(_storage(home, "envtests", "sk115", trial, "result.json").read_text())
        assert report["pandas"] == "0.24.2" and report["sklearn"] == "0.20.2", report
        assert "/site/" not in report["pandas_file"]  # the image's pandas met the pin: already satisfied
        assert "/site/sklearn/" in report["sklearn_file"]  # the older pin went over the image's 0.20.4
        assert report["tabulate"] == "0.8.7", report  # open: its release of 2020-12-19, in every trial
    assert _storage(home, "envtests", "sk115", "1", "model.joblib").stat().st_size > 0


def test_xgboost_0_81_pinned_by_the_trainer_is_the_one_it_runs(runtime_envs: Path, home: Path) -> None:
    result = submit("xgb081", "xgboost_pinned", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--job-dir", "gs://envtests/xgb081")
    assert result.returncode == 0, _logs(result)[-4000:]
    report = json.loads(_storage(home, "envtests", "xgb081", "result.json").read_text())
    assert report["xgboost"] == "0.81" and report["rmse"] < 0.3, report


def test_runtime_1_10_without_python_2_7_here_runs_on_the_nearest_python_3_when_the_setting_allows(
        no_python_found: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    python36 = interpreters.find("3.6", {"PATH": "", "PYENV_ROOT": "/root/.pyenv"})
    if python36 is None:
        pytest.skip("no Python 3.6 in pyenv's root")
    monkeypatch.setenv(interpreters.PYTHONS_SETTING, f"3.6={python36.path}")  # 3.6 is found, 2.7 is not
    monkeypatch.setenv(PYTHON2_MISSING_SETTING, "python3")
    result = submit("tf110", "tf1_10_session", "--runtime-version", "1.10", "--job-dir", "gs://envtests/tf110")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    assert ("Runtime version 1.10 with Python 2.7 (the service's default): TensorFlow 1.10.1 on Python 3.6 (" in logs)
    assert "no Python 2.7 was found here (looked in AIPTRAIN_PYTHONS, " in logs
    assert "AIPTRAIN_PYTHON2_MISSING=python3 runs it on 3.6, the nearest Python 3 with a TensorFlow 1.10 build" in logs
    assert "warning: runtime version 1.10 was retired by AI Platform Training" in result.stderr
    assert _storage(home, "envtests", "tf110", "sum.txt").read_text() == "42 1.10.1 3.6\n"
    described = aiptrain("jobs", "describe", "tf110")
    assert "Ran in:" in described.stderr and "TensorFlow 1.10.1 on Python 3.6" in described.stderr


def test_a_pin_the_runtime_python_cannot_take_fails_in_preparing_with_one_line(runtime_envs: Path,
                                                                               home: Path) -> None:
    # pandas 1.4.1 (2022-02-12) is after runtime 1.15's day: the pin moves the job to its own day,
    # and fails there as it failed on the service (Google's hp_tuning sample of 2022 pinned it).
    result = submit("py38pin", "pin_needs_py38", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--job-dir", "gs://envtests/py38")
    assert result.returncode == 10, _logs(result)[-4000:]
    assert ("Trainer packages resolve as of 2022-02-12: the trainer pins pandas==1.4.1, published that day"
            in _logs(result))
    message = describe("py38pin")["errorMessage"]
    assert message == ("Installing the trainer package pin_needs_py38_trainer-0.1.tar.gz failed: pandas==1.4.1 "
                       "needs Python >= 3.8; runtime 1.15 runs Python 3.7."), message
    assert "this trainer must never start" not in _logs(result)
    assert "Job RUNNING." not in _logs(result)


def test_unmeetable_install_requires_fails_in_preparing_and_leaves_nothing(runtime_envs: Path,
                                                                           home: Path) -> None:
    result = submit("unmeetable", "unmeetable", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--job-dir", "gs://envtests/un")
    assert result.returncode == 10, _logs(result)[-4000:]
    message = describe("unmeetable")["errorMessage"]
    assert message == ("Installing the trainer package unmeetable_trainer-0.1.tar.gz failed: its requirement "
                       "scikit-learn==0.0.99 has no file on the package index published by 2020-12-19. Hint: check "
                       "the version, or run the job as of a later day (--labels aiptrain-resolve-as-of=YYYY-MM-DD, "
                       "or AIPTRAIN_RESOLVE_AS_OF)."), message
    assert "this trainer must never start" not in _logs(result)
    assert "Job RUNNING." not in _logs(result)
    cache = home / "cache" / "site"
    # No entry, no half-built staging; the pins' publication days, asked of the index before the
    # install, are kept beside the entries for the next job.
    assert not cache.exists() or [entry.name for entry in cache.iterdir()] in ([], [DATES_DIRECTORY])
    assert not list((home / "jobs").glob("*/unmeetable/site/*"))


@pytest.fixture
def no_python_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runtime_envs: Path) -> Path:
    """A machine where no interpreter is found: no pyenv root, no uv Pythons, nothing on PATH, no
    downloads (the command itself is run by its full path)."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "no-uv-pythons"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setenv(interpreters.DOWNLOADS_SETTING, "never")
    monkeypatch.delenv(interpreters.PYTHONS_SETTING, raising=False)
    return tmp_path


def test_without_the_runtime_python_the_job_falls_back_to_tensorflow_2_15_and_says_so(
        no_python_found: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    fallback_python = "/root/.pyenv/versions/3.11.7/bin/python3.11"
    found = interpreters.find("3.11")
    if found is not None:
        fallback_python = found.path
    monkeypatch.setenv(interpreters.PYTHONS_SETTING, f"3.11={fallback_python}")
    result = submit("fallback", "compat_v1", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--job-dir", "gs://envtests/fallback")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    assert "TensorFlow 2.15.1 on Python 3.11" in logs
    assert "no Python that TensorFlow 1.15.0 installs on (3.7, 3.6) was found here" in logs
    assert "runs the fallback environment" in logs and "TF-1-only modules (tf.contrib" in logs
    assert _storage(home, "envtests", "fallback", "sum.txt").read_text().startswith("42 2.15.1")


def test_without_python_2_7_a_python_2_7_job_fails_in_preparing_naming_it(no_python_found: Path) -> None:
    # Runtime 1.15 without --python-version ran 2.7; a Python 3 stands in only when the setting says so.
    result = submit("nopy27", "compat_v1", "--runtime-version", "1.15", "--job-dir", "gs://envtests/nopy27")
    assert result.returncode == 10, _logs(result)[-4000:]
    message = describe("nopy27")["errorMessage"]
    assert message.startswith("Runtime version 1.15 with Python 2.7 (the service's default) cannot run here: no "
                              "Python 2.7 was found here (looked in AIPTRAIN_PYTHONS, "), message
    assert ("To run it, install CPython 2.7.18 (`pyenv install 2.7.18`, or your system's python2.7), or name it: "
            "AIPTRAIN_PYTHONS=/path/to/python2.7; or set AIPTRAIN_PYTHON2_MISSING=python3 to run it on the "
            "runtime's nearest Python 3") in message, message
    assert "uv python install" not in message  # uv has no Python 2
    assert "Job RUNNING." not in _logs(result)


def test_with_no_python_at_all_the_job_fails_in_preparing_with_the_way_out(no_python_found: Path) -> None:
    result = submit("nopython", "compat_v1", "--runtime-version", "1.15", "--python-version", "3.7",
                    "--job-dir", "gs://envtests/nopython")
    assert result.returncode == 10, _logs(result)[-4000:]
    message = describe("nopython")["errorMessage"]
    assert "no Python that TensorFlow 1.15.0 installs on (3.7, 3.6) was found" in message, message
    assert "nor one for the fallback TensorFlow 2.15.1 (3.9, 3.10, 3.11)" in message
    assert "uv python install 3.7" in message and "pyenv install 3.7" in message
    assert "AIPTRAIN_PYTHONS=/path/to/python3.7" in message
    assert "Job RUNNING." not in _logs(result)


def test_an_offline_python_download_fails_within_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on the discard port of loopback: the download's first connection is refused,
    # as on a machine without internet.
    monkeypatch.setenv("UV_PYTHON_INSTALL_MIRROR", "http://127.0.0.1:9/python-build-standalone")
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv-pythons"))
    started = time.monotonic()
    found, why = interpreters.download("3.8")
    elapsed = time.monotonic() - started
    assert found is None
    assert why.startswith("`uv python install 3.8` failed: "), why
    assert elapsed < 10, elapsed
    monkeypatch.setenv(interpreters.DOWNLOADS_SETTING, "never")
    assert interpreters.download("3.8") == (None, "downloads are turned off (AIPTRAIN_PYTHON_DOWNLOADS=never)")


def test_two_jobs_started_at_once_share_one_environment_build(runtime_envs: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = tmp_path / "fresh-envs"  # nothing built yet (uv's cache is warm from the session's build)
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(fresh))
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "2")
    for job_id in ("shared_a", "shared_b"):
        submitted = submit(job_id, "compat_v1", "--runtime-version", "1.15", "--python-version", "3.7",
                           "--job-dir", f"gs://envtests/{job_id}", stream=False)
        assert submitted.returncode == 0, submitted.stderr
    jobs = [wait_for_end(job_id) for job_id in ("shared_a", "shared_b")]
    assert [job["state"] for job in jobs] == ["SUCCEEDED", "SUCCEEDED"], jobs
    logs = [job_log(job_id) for job_id in ("shared_a", "shared_b")]
    building = "Building runtime 1.15 on Python 3.7 as of 2020-12-19: tensorflow 1.15.0"
    assert sum(log.count(building) for log in logs) == 1, logs
    assert len([p for p in fresh.iterdir() if not p.name.startswith(".")]) == 1


def test_local_train_runs_in_the_runtime_environment(runtime_envs: Path, built_environment: Environment,
                                                     tmp_path: Path) -> None:
    result = aiptrain("local", "train", "--package-path", str(TRAINERS / "compat_v1" / "trainer"),
                      "--module-name", "trainer.task", "--runtime-version", "1.15", "--python-version", "3.7",
                      "--job-dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"[aiptrain] Starting master-replica-0: {built_environment.python} -m trainer.task" in result.stderr
    assert "[aiptrain] Runtime version 1.15 with Python 3.7: TensorFlow 1.15.0 on Python 3.7" in result.stderr
    assert (tmp_path / "out" / "sum.txt").read_text().startswith("42 1.15.0")
