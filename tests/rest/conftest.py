"""Fixtures for the REST tests: one trainer sdist per session, a real emulator per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.gcs import fake_gcs, fake_gcs_server
from tests.rest.harness import Emulator, make_trainer_project, running_emulator

__all__ = ["emulator", "fake_gcs", "fake_gcs_server", "trainer_sdist"]


@pytest.fixture(scope="session")
def trainer_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test trainer, built the way `jobs submit training --package-path` builds it."""
    from aiptrain.packaging import build_package

    root = tmp_path_factory.mktemp("trainer-src")
    package = make_trainer_project(root / "project")
    built = build_package(package, cache_dir=root / "cache")
    return built.path


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("emulator-home")) as server:
        yield server
