"""One real two-node Ray cluster for the whole session (started only if a test here asks for it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.ray.cluster import RayCluster, start_cluster
from tests.fixtures.template import TEMPLATE_DIR, trainer_environment


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    # A short path: Ray's Unix sockets live under it, and their paths are limited to 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="aipr-"))
    cluster = start_cluster(temp_dir)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template's digits shards, written once by its own script."""
    directory = tmp_path_factory.mktemp("ray-digits")
    subprocess.run([sys.executable, "-m", "trainer.make_data", "--output-dir", str(directory), "--shards", "4"],
                   cwd=TEMPLATE_DIR, env=trainer_environment(), check=True, capture_output=True, timeout=120)
    return directory


@pytest.fixture
def on_cluster(ray_cluster: RayCluster, monkeypatch: pytest.MonkeyPatch) -> RayCluster:
    """The submitter's environment pointed at the cluster, with quick restarts."""
    monkeypatch.setenv("AIPTRAIN_RAY_ADDRESS", ray_cluster.address)
    monkeypatch.setenv("AIPTRAIN_LOCAL_RESTART_DELAY", "0.5")
    monkeypatch.setenv("AIPTRAIN_LOCAL_KILL_GRACE", "2")
    # The nodes run this venv, which has what the trainers import: no runtime environments to build.
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "cluster")
    return ray_cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The node-loss test stops the cluster's second node: it runs after every other Ray test."""
    items.sort(key=lambda item: isinstance(item, pytest.Function) and item.module is not None
               and item.module.__name__.endswith("test_ray_node_loss"))
