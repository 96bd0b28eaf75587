"""Fixtures for the tuning tests: the test trainer package, an engine per test, cleanup.

Every test gets its own AIPTRAIN_HOME (tests/conftest.py). The trainer package under
trainers/hptrainer (no TensorFlow) is built once per session and staged into each test's local
store. At teardown every supervisor and replica of the test's jobs is killed, whatever happened.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aiptrain._packaging import build_package
from tests.fixtures.engine import engine, home, quick_settings
from tests.tuning.harness import TRAINERS

__all__ = ["engine", "home", "quick_settings"]


@pytest.fixture(scope="session")
def trainer_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_package(TRAINERS / "hptrainer", cache_dir=tmp_path_factory.mktemp("sdist-cache")).path


@pytest.fixture
def package_uri(home: Path, trainer_sdist: Path) -> str:
    target = home / "storage" / "staging" / trainer_sdist.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(trainer_sdist, target)
    return f"gs://staging/{trainer_sdist.name}"

