"""Jobs created through `aiptrain local serve` run against the storage their client staged into."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.mlv1.backend import MlV1Backend
from aiptrain._backends.polling import AdaptivePoller
from aiptrain._job.logs import LogEntry
from aiptrain._job.spec import JobState, parse_job
from aiptrain._submit.follow import follow_job
from tests.fixtures.emulator import Emulator, running_emulator
from tests.fixtures.gcs import FakeGcsServer

PROJECT = "storage-project"


@pytest.fixture(scope="module")
def served_with_gcs(tmp_path_factory: pytest.TempPathFactory, fake_gcs_server: FakeGcsServer) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("storage-home"),
                          env={"STORAGE_EMULATOR_HOST": fake_gcs_server.endpoint}) as server:
        yield server


@pytest.fixture(autouse=True)
def client_home(isolated_environment: Path, served_with_gcs: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test is the server's local client: it shares its AIPTRAIN_HOME, so it finds the token."""
    monkeypatch.setenv("AIPTRAIN_HOME", str(served_with_gcs.home))


def test_with_a_gcs_emulator_the_job_gets_its_gs_job_dir_unchanged_and_served_from_that_emulator(
    served_with_gcs: Emulator, fake_gcs_server: FakeGcsServer, trainer_sdist: Path
) -> None:
    package = served_with_gcs.stage(trainer_sdist, "gs://storage-local/packages/trainer.tar.gz")
    backend = MlV1Backend(BackendSettings(project=PROJECT, region="us-central1", api_endpoint=served_with_gcs.url))
    backend.create_job(parse_job({"jobId": "served", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [package],
        "pythonModule": "trainer.task", "args": ["--lines", "1"], "jobDir": "gs://storage-out/served"}}))
    seen: list[LogEntry] = []
    result = follow_job(backend, "served", on_entry=seen.append, timeout=120,
                        poller=AdaptivePoller(fast=0.2, ceiling=1.0))
    assert result.job.state == JobState.SUCCEEDED, result.job.error_message
    texts = [entry.message for entry in seen]
    assert "job-dir=gs://storage-out/served" in texts
    assert any(t.startswith(f"gs:// is served to the replicas from the storage emulator {fake_gcs_server.endpoint}")
               for t in texts), texts
