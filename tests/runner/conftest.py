"""Fixtures for the local engine tests: a built trainer package, an engine per test, cleanup.

Every test gets its own AIPTRAIN_HOME (the autouse fixture in tests/conftest.py sets it through
the environment, so supervisors inherit it). The trainer package under trainers/tfcfg is built
once per session and staged into each test's local store as gs://staging/packages/<file>.
At teardown every process a test's jobs started is killed, whatever state the test left.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from aiptrain.backends import get_backend
from aiptrain.backends.base import BackendSettings
from aiptrain.backends.local.backend import LocalBackend
from aiptrain.backends.local.engine import LocalEngine
from aiptrain.job.spec import Job, JobState
from aiptrain.packaging import build_package
from aiptrain.replicas.processes import is_running, process_start_ticks, tokened_processes
from tests.fixtures.engine import engine, home, kill_everything, quick_settings, wait_until

__all__ = ["engine", "home", "kill_everything", "quick_settings", "wait_until"]

TRAINERS = Path(__file__).parent / "trainers"
PROJECT = "test-project"


@pytest.fixture(scope="session")
def trainer_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = build_package(TRAINERS / "tfcfg", cache_dir=tmp_path_factory.mktemp("sdist-cache"))
    return built.path


@pytest.fixture
def backend(home: Path) -> Any:
    """The local backend of this test's home; whatever its jobs started is killed afterwards."""
    backend = get_backend("local", BackendSettings(project=PROJECT, home=home))
    assert isinstance(backend, LocalBackend)
    yield backend
    kill_everything(backend.engine)


@pytest.fixture
def package_uri(home: Path, trainer_sdist: Path) -> str:
    target = home / "storage" / "staging" / "packages" / trainer_sdist.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(trainer_sdist, target)
    return f"gs://staging/packages/{trainer_sdist.name}"


def training_input(
    package_uri: str,
    module: str,
    *,
    job_dir: str | None = None,
    args: list[str] | None = None,
    workers: int = 0,
    parameter_servers: int = 0,
    evaluators: int = 0,
    runtime: str | None = "2.11",
    **extra: Any,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4",
        "packageUris": [package_uri],
        "pythonModule": module,
        "region": "us-central1",
    }
    if runtime:
        data["runtimeVersion"] = runtime
    if job_dir:
        data["jobDir"] = job_dir
    if args:
        data["args"] = args
    for role, count in (("worker", workers), ("parameterServer", parameter_servers), ("evaluator", evaluators)):
        if count:
            data[f"{role}Type"] = "n1-standard-4"
            data[f"{role}Count"] = str(count)
    data.update(extra)
    return data


def make_job(job_id: str, inputs: dict[str, Any]) -> Job:
    return Job.model_validate({"jobId": job_id, "trainingInput": inputs})


def wait_for_state(engine: LocalEngine, job_id: str, states: set[JobState], timeout: float = 120.0) -> Job:
    def reached() -> Job | None:
        job = engine.get(PROJECT, job_id)
        return job if job.state in states else None

    try:
        return wait_until(reached, timeout, f"job {job_id} to reach {sorted(s.value for s in states)}")
    except AssertionError:
        job = engine.get(PROJECT, job_id)
        lines = "\n".join(f"  {e.severity} {e.task_name}: {e.message}" for e in engine.logs(PROJECT, job_id))
        raise AssertionError(f"job {job_id} is {job.state}; its log:\n{lines}") from None


def wait_for_end(engine: LocalEngine, job_id: str, timeout: float = 120.0) -> Job:
    return wait_for_state(engine, job_id, {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}, timeout)


def local_dir(home: Path, uri: str) -> Path:
    assert uri.startswith("gs://")
    return home / "storage" / uri.removeprefix("gs://")


# pid -> start time when a test first saw it, so a pid reused later is not mistaken for it.
_START_TICKS: dict[int, int | None] = {}


def read_pid(path: Path, timeout: float = 60.0) -> int:
    wait_until(path.exists, timeout, f"{path} to appear")
    pid = int(path.read_text())
    _START_TICKS.setdefault(pid, process_start_ticks(pid))
    return pid


def processes_gone(pids: list[int], timeout: float = 10.0) -> bool:
    """True once none of the pids is a live process (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(is_running(pid, _START_TICKS.get(pid)) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def token_processes(engine: LocalEngine, job_id: str) -> list[int]:
    return tokened_processes(engine.processes(PROJECT, job_id).run_token)
