"""Runtime 1.x jobs on Python 2.7 run on CPython 2.7, as the service ran them: environments made by
virtualenv and installed by pip 20.3.4 from the index of the runtime's day, the trainer installed by
that pip too, single replicas and estimator clusters alike."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from aiptrain._environments import interpreters
from aiptrain._environments.resolution import resolve_version
from aiptrain._environments.store import Environment, EnvironmentStore, damage_of
from aiptrain._job.catalog import load_catalog

from .conftest import aiptrain, submit

pytestmark = [pytest.mark.slow, pytest.mark.runtime_envs]


def _logs(result: object) -> str:
    return str(getattr(result, "stdout", "")) + str(getattr(result, "stderr", ""))


@pytest.fixture(scope="session")
def python2_environment(shared_envs_dir: Path) -> Environment:
    """Runtime 1.15's environment on Python 2.7 (TensorFlow 1.15.0), built once for the session."""
    if interpreters.find("2.7") is None:
        pytest.skip("no CPython 2.7 on this machine (pyenv install 2.7.18)")
    resolution = resolve_version("1.15", load_catalog(), python="2.7")
    assert resolution is not None and resolution.python == "2.7" and resolution.problem is None
    return EnvironmentStore(shared_envs_dir).ensure(resolution, progress=lambda _line: None)


def test_a_python_2_only_trainer_runs_on_python_2_7_18_and_tensorflow_1_15_0(
        runtime_envs: Path, home: Path, python2_environment: Environment) -> None:
    result = submit("py2only", "py2_only", "--runtime-version", "1.15", "--python-version", "2.7",
                    "--job-dir", "gs://envtests/py2only")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    assert "Runtime version 1.15 with Python 2.7: TensorFlow 1.15.0 on Python 2.7 (" in logs
    assert f"Starting master-replica-0: {python2_environment.python} -m trainer.task" in logs
    assert "with the runtime's own pip 20.3.4 on Python 2.7 (uv drives Python 3 only)" in logs
    assert "py2 trainer master 0 finished on TensorFlow 1.15.0" in logs  # its print statement ran
    report = json.loads(home.joinpath("storage", "envtests", "py2only", "report.json").read_text())
    # tabulate is open in its install_requires: pip took the release of runtime 1.15's day.
    assert report == {"python": "2.7.18", "tensorflow": "1.15.0", "tabulate": "0.8.7"}, report
    manifest = python2_environment.manifest()
    assert manifest["python_version"] == "2.7" and manifest["builder"] == "virtualenv==20.21.1, pip 20.3.4"
    assert manifest["installed"]["tensorflow"] == "1.15.0" and manifest["installed"]["numpy"] == "1.16.5"
    # Python 2 writes its bytecode beside the sources it imports (where PYTHONDONTWRITEBYTECODE is
    # unset): not a change to the environment.
    stray = python2_environment.root / "lib" / "python2.7" / "site-packages" / "six.pyc"
    stray.write_bytes(b"\x03\xf3\r\n")
    try:
        assert damage_of(python2_environment) is None
    finally:
        stray.unlink()


def test_a_python_2_7_estimator_cluster_of_master_worker_and_ps_trains(
        runtime_envs: Path, home: Path, python2_environment: Environment, tmp_path: Path) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text("trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n"
                      "  workerType: n1-standard-4\n  workerCount: 1\n"
                      "  parameterServerType: n1-standard-4\n  parameterServerCount: 1\n")
    result = submit("py2cluster", "py2_only", "--runtime-version", "1.15", "--python-version", "2.7",
                    "--config", str(config), "--job-dir", "gs://envtests/py2cluster")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    for task in ("master-replica-0", "worker-replica-0", "ps-replica-0"):
        assert f"Starting {task}: {python2_environment.python} -m trainer.task" in logs
    # The master's end stops the worker and the parameter server, as on the service: the worker may
    # or may not have printed its own last line by then.
    assert "py2 trainer master 0 finished on TensorFlow 1.15.0" in logs
    checkpoint = home.joinpath("storage", "envtests", "py2cluster", "model", "checkpoint").read_text()
    last = re.search(r'^model_checkpoint_path: "model.ckpt-(\d+)"', checkpoint, re.MULTILINE)
    assert last and int(last.group(1)) >= 20, checkpoint


def test_a_runtime_1_14_job_without_python_version_runs_on_python_2_7(runtime_envs: Path, home: Path) -> None:
    if interpreters.find("2.7") is None:
        pytest.skip("no CPython 2.7 on this machine (pyenv install 2.7.18)")
    result = submit("tf114", "tf1_10_session", "--runtime-version", "1.14", "--job-dir", "gs://envtests/tf114")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    assert "Runtime version 1.14 with Python 2.7 (the service's default): TensorFlow 1.14.0 on Python 2.7 (" in logs
    assert "Building runtime 1.14 on Python 2.7 as of 2020-07-19" in logs
    assert home.joinpath("storage", "envtests", "tf114", "sum.txt").read_text() == "42 1.14.0 2.7\n"
    listed = json.loads(aiptrain("local", "envs", "list", "--format", "json").stdout)
    assert any(row["runtimeVersions"] == ["1.14"] and row["python"] == "2.7" for row in listed), listed
