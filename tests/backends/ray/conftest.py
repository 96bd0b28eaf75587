"""The Ray tests' data, and their order (the cluster itself: tests/fixtures/ray_cluster.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.template import TEMPLATE_DIR, trainer_environment


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template's digits shards, written once by its own script."""
    directory = tmp_path_factory.mktemp("ray-digits")
    subprocess.run([sys.executable, "-m", "trainer.make_data", "--output-dir", str(directory), "--shards", "4"],
                   cwd=TEMPLATE_DIR, env=trainer_environment(), check=True, capture_output=True, timeout=120)
    return directory


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The node-loss test stops the cluster's second node: it runs after every other Ray test."""
    items.sort(key=lambda item: isinstance(item, pytest.Function) and item.module is not None
               and item.module.__name__.endswith("test_ray_node_loss"))
