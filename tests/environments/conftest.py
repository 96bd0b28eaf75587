"""Runtime environments for the tests that need the real ones.

Building an environment (a runtime's TensorFlow and packages on its Python) is the slow part, so
each is built once per test session into a shared directory (`AIPTRAIN_ENVS_DIR`) that every test
here that runs a job in one uses (`runtime_envs`; such tests carry the `runtime_envs` marker, which
keeps them on one xdist worker). Other tests in the suite run trainers with the test interpreter
(`AIPTRAIN_LOCAL_PYTHON`, set by tests/conftest.py); `runtime_envs` unsets it. The install cache's
tests use the local engine's test trainer package (tests/fixtures/local_jobs.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._environments.resolution import resolve_version
from aiptrain._environments.store import Environment, EnvironmentStore
from aiptrain._job.catalog import load_catalog
from tests.fixtures.engine import engine, home, quick_settings
from tests.fixtures.held_index import held_index
from tests.fixtures.local_jobs import package_uri, trainer_sdist

__all__ = ["engine", "held_index", "home", "package_uri", "quick_settings", "trainer_sdist"]

TRAINERS = Path(__file__).parent / "trainers"
AIPTRAIN = [str(Path(sys.executable).parent / "aiptrain")]  # the console script of this venv
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@pytest.fixture(scope="session")
def shared_envs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runtime-envs")


@pytest.fixture(scope="session")
def built_environment(shared_envs_dir: Path) -> Environment:
    """Runtime 1.15's own environment (TensorFlow 1.15.0 on Python 3.7), built once for the session."""
    resolution = resolve_version("1.15", load_catalog(), python="3.7")
    assert resolution is not None
    lines: list[str] = []
    return EnvironmentStore(shared_envs_dir).ensure(resolution, progress=lines.append)


@pytest.fixture
def runtime_envs(monkeypatch: pytest.MonkeyPatch, shared_envs_dir: Path, built_environment: Environment,
                 engine: LocalJobEngine) -> Path:
    """Jobs of this test run in the session's runtime environments (not the test interpreter);
    whatever they started is killed at teardown (`engine`)."""
    monkeypatch.delenv("AIPTRAIN_LOCAL_PYTHON", raising=False)
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(shared_envs_dir))
    return shared_envs_dir


def aiptrain(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The real command line, in a subprocess (the environment of the test)."""
    return subprocess.run([*AIPTRAIN, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ), check=False)


def submit(job_id: str, trainer: str, *flags: str, stream: bool = True, trainer_args: tuple[str, ...] = ()
           ) -> subprocess.CompletedProcess[str]:
    argv = ["jobs", "submit", "training", job_id, "--package-path", str(TRAINERS / trainer / "trainer"),
            "--module-name", "trainer.task", "--region", "us-central1", *flags]
    if stream:
        argv.append("--stream-logs")
    if trainer_args:
        argv += ["--", *trainer_args]
    return aiptrain(*argv)


def describe(job_id: str) -> dict[str, Any]:
    result = aiptrain("jobs", "describe", job_id, "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def wait_for_end(job_id: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = describe(job_id)
        if job.get("state") in TERMINAL:
            return job
        assert time.monotonic() < deadline, f"{job_id} still {job.get('state')} after {timeout} s"
        time.sleep(0.5)


def job_log(job_id: str) -> str:
    result = aiptrain("jobs", "stream-logs", job_id, "--allow-multiline-logs")
    return result.stdout + result.stderr
