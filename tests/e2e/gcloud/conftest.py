"""The gcloud suite runs only where Google's `gcloud` is installed (CI machines have it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.e2e.gcloud.harness import GcloudSession, gcloud_session, make_trainer
from tests.fixtures.gcs import FakeGcsServer, fake_gcs_server

__all__ = ["fake_gcs_server"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if shutil.which("gcloud") is not None:
        return
    skip = pytest.mark.skip(reason="gcloud is not on PATH (install the Google Cloud CLI to run the gcloud suite)")
    for item in items:
        if item.get_closest_marker("gcloud") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def gcloud(tmp_path_factory: pytest.TempPathFactory, fake_gcs_server: FakeGcsServer) -> Iterator[GcloudSession]:
    with gcloud_session(tmp_path_factory.mktemp("gcloud"), fake_gcs_server.endpoint) as session:
        make_trainer(session.work)
        yield session
