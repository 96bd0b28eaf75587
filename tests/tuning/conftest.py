"""Fixtures for the tuning tests: the test trainer package, an engine per test, cleanup.

Every test gets its own AIPTRAIN_HOME (tests/conftest.py). The trainer package under
trainers/hptrainer (no TensorFlow) is built once per session and staged into each test's local
store. At teardown every supervisor and replica of the test's jobs is killed, whatever happened.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain.packaging import build_package
from aiptrain.runner.engine import LocalEngine
from tests.tuning.harness import TRAINERS, kill_everything


@pytest.fixture(scope="session")
def trainer_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_package(TRAINERS / "hptrainer", cache_dir=tmp_path_factory.mktemp("sdist-cache")).path


@pytest.fixture
def home(isolated_environment: Path) -> Path:
    return isolated_environment


@pytest.fixture
def package_uri(home: Path, trainer_sdist: Path) -> str:
    target = home / "storage" / "staging" / trainer_sdist.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(trainer_sdist, target)
    return f"gs://staging/{trainer_sdist.name}"


@pytest.fixture(autouse=True)
def quick_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # Test trainers stop at once on SIGTERM; a short grace keeps stops fast.
    monkeypatch.setenv("AIPTRAIN_LOCAL_KILL_GRACE", "3")
    monkeypatch.delenv("AIPTRAIN_LOCAL_MAX_RUNNING", raising=False)
    monkeypatch.delenv("AIPTRAIN_LOCAL_REPLICA_CAP", raising=False)
    monkeypatch.delenv("CLOUD_ML_HP_METRIC_FILE", raising=False)


@pytest.fixture
def engine(home: Path) -> Iterator[LocalEngine]:
    engine = LocalEngine(home)
    yield engine
    kill_everything(engine)
