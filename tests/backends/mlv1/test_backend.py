"""MlV1Backend and VertexBackend against the emulator: real HTTP, real engine, real trainer.

The package is built with aiptrain's packaging, staged in fake-gcs-server (or the emulator's local
store), the job runs in the local engine behind the emulator, and its log comes back through
logging v2 `entries.list` with a (timestamp, insertId) cursor.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain.backends.base import BackendSettings
from aiptrain.backends.mlv1.backend import MlV1Backend
from aiptrain.backends.polling import AdaptivePoller
from aiptrain.backends.vertex.backend import VertexBackend
from aiptrain.errors import AlreadyExists, NotFound, ValidationFailed
from aiptrain.job.logs import LogEntry
from aiptrain.job.spec import Job, JobState, parse_job
from aiptrain.submit.follow import follow_job
from tests.fixtures.emulator import Emulator, running_emulator, wait_until
from tests.fixtures.gcs import FakeGcsServer

PROJECT = "e2e-project"
LOCAL_PACKAGE = "gs://e2e-local/packages/trainer.tar.gz"


@pytest.fixture(scope="module")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory, fake_gcs_server: FakeGcsServer) -> Iterator[Emulator]:
    """An emulator that fetches packages from the session's fake-gcs-server."""
    env = {"STORAGE_EMULATOR_HOST": fake_gcs_server.endpoint}
    with running_emulator(tmp_path_factory.mktemp("e2e-home"), env=env) as server:
        yield server


@pytest.fixture(autouse=True)
def client_home(isolated_environment: Path, gcs_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test is the server's local client: it shares its AIPTRAIN_HOME, so it finds the token."""
    monkeypatch.setenv("AIPTRAIN_HOME", str(gcs_emulator.home))


@pytest.fixture(scope="module")
def gcs_package(fake_gcs_server: FakeGcsServer, trainer_sdist: Path) -> str:
    """The trainer uploaded to fake-gcs-server with aiptrain's GCS store."""
    import os

    from aiptrain.storage.gcs import GcsObjectStore

    bucket = fake_gcs_server.make_bucket()
    uri = f"{bucket}/packages/{trainer_sdist.name}"
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = fake_gcs_server.endpoint
    try:
        GcsObjectStore(project="test").upload(trainer_sdist, uri)
    finally:
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
    return uri


def settings(emulator: Emulator, region: str | None = "us-central1") -> BackendSettings:
    return BackendSettings(project=PROJECT, region=region, api_endpoint=emulator.url)


def training_job(job_id: str, package: str, *args: str, **training_input: object) -> Job:
    return parse_job({"jobId": job_id, "labels": {"suite": "e2e"}, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [package],
        "pythonModule": "trainer.task", "args": list(args), "jobDir": "gs://e2e-local/out/" + job_id,
        **training_input}})


def follow(backend: MlV1Backend | VertexBackend, job_id: str,
           task_name: str | None = None) -> tuple[Job, list[LogEntry]]:
    seen: list[LogEntry] = []
    result = follow_job(backend, job_id, on_entry=seen.append, task_name=task_name, timeout=120,
                        poller=AdaptivePoller(fast=0.2, ceiling=1.0))
    assert not result.timed_out
    return result.job, seen


def messages(entries: list[LogEntry]) -> list[str]:
    return [e.message for e in entries]


# -- mlv1 ---------------------------------------------------------------------------------------


def test_mlv1_job_from_fake_gcs_runs_and_streams_its_log(gcs_emulator: Emulator, gcs_package: str) -> None:
    backend = MlV1Backend(settings(gcs_emulator))
    created = backend.create_job(training_job("mlv1_gcs", gcs_package, "--lines", "3"))
    assert created.job_id == "mlv1_gcs"
    assert created.state in (JobState.QUEUED, JobState.PREPARING, JobState.RUNNING)
    job, entries = follow(backend, "mlv1_gcs")
    assert job.state == JobState.SUCCEEDED, job.error_message
    texts = messages(entries)
    assert [t for t in texts if t.startswith("line ")] == [f"line {i} from chief-0" for i in range(3)]
    assert any(t.startswith("job-dir=") and t.endswith("e2e-local/out/mlv1_gcs") for t in texts)
    # No entry twice, and in cursor order.
    cursors = [e.cursor for e in entries]
    assert cursors == sorted(set(cursors))
    assert {e.task_name for e in entries if e.message.startswith("line ")} == {"master-replica-0"}
    # Nothing after the last cursor; one task only when asked.
    assert backend.read_logs("mlv1_gcs", after=entries[-1].cursor) == []
    only_master = backend.read_logs("mlv1_gcs", task_name="master-replica-0")
    assert only_master and {e.task_name for e in only_master} == {"master-replica-0"}
    # A small limit pages through the same entries.
    assert backend.read_logs("mlv1_gcs", limit=2) == entries[:2]


def test_mlv1_failure_cancel_duplicates_and_missing(gcs_emulator: Emulator, trainer_sdist: Path) -> None:
    gcs_emulator.stage(trainer_sdist, LOCAL_PACKAGE)
    backend = MlV1Backend(settings(gcs_emulator))
    backend.create_job(training_job("mlv1_fails", LOCAL_PACKAGE, "--exit-code", "3"))
    with pytest.raises(AlreadyExists):
        backend.create_job(training_job("mlv1_fails", LOCAL_PACKAGE))
    job, entries = follow(backend, "mlv1_fails")
    assert job.state == JobState.FAILED
    assert job.error_message and "3" in job.error_message
    assert "failing on purpose" in messages(entries)

    backend.create_job(training_job("mlv1_cancel", LOCAL_PACKAGE, "--sleep", "120"))
    wait_until(lambda: backend.get_job("mlv1_cancel").state == JobState.RUNNING)
    backend.cancel_job("mlv1_cancel")
    job, _ = follow(backend, "mlv1_cancel")
    assert job.state == JobState.CANCELLED

    with pytest.raises(NotFound):
        backend.get_job("mlv1_nobody")
    with pytest.raises(NotFound):
        backend.cancel_job("mlv1_nobody")
    assert backend.read_logs("mlv1_nobody") == []
    listed = [j.job_id for j in backend.list_jobs(page_size=1)]
    assert {"mlv1_fails", "mlv1_cancel"} <= set(listed)


def test_mlv1_server_side_validation_comes_back_as_problems(gcs_emulator: Emulator) -> None:
    backend = MlV1Backend(settings(gcs_emulator))
    with pytest.raises(ValidationFailed) as raised:
        backend.create_job(training_job("bad-id", LOCAL_PACKAGE))
    assert [p.path for p in raised.value.problems] == ["job_id"]
    assert raised.value.exit_code == 2


def test_mlv1_request_body_is_the_job_without_output_fields(gcs_emulator: Emulator) -> None:
    job = training_job("body_only", LOCAL_PACKAGE)
    job.state = JobState.RUNNING
    job.create_time = "2024-01-01T00:00:00Z"
    body = MlV1Backend(settings(gcs_emulator)).request_body(job)
    assert set(body) == {"jobId", "labels", "trainingInput"}


# -- vertex -------------------------------------------------------------------------------------


def test_vertex_job_runs_as_a_custom_job(gcs_emulator: Emulator, gcs_package: str) -> None:
    backend = VertexBackend(settings(gcs_emulator))
    job = training_job("vertex_ok", gcs_package, "--lines", "2", "--await-peers", scaleTier="CUSTOM",
                       masterType="n1-standard-4", workerType="n1-standard-4", workerCount="1")
    created = backend.create_job(job)
    assert created.job_id == "vertex_ok"
    assert created.training_input is not None and created.training_input.region == "us-central1"
    with pytest.raises(AlreadyExists):
        backend.create_job(job)
    final, entries = follow(backend, "vertex_ok")
    assert final.state == JobState.SUCCEEDED, final.error_message
    assert final.end_time
    texts = messages(entries)
    assert [t for t in texts if t.startswith("line ")] == ["line 0 from chief-0", "line 1 from chief-0"]
    assert "worker-0 waiting" in texts
    # Vertex's workerpoolN-I task names are shown as ml v1 names, and either form filters.
    by_task = {e.task_name for e in entries}
    assert {"master-replica-0", "worker-replica-0"} <= by_task
    workers = backend.read_logs("vertex_ok", task_name="worker-replica-0")
    assert workers and {e.task_name for e in workers} == {"worker-replica-0"}
    assert backend.read_logs("vertex_ok", task_name="workerpool1-0") == workers

    described = backend.get_job("vertex_ok")
    assert described.training_input is not None
    assert described.training_input.worker_count == 1
    assert described.training_input.package_uris == [gcs_package]
    assert described.labels == {"suite": "e2e"}
    assert "vertex_ok" in [j.job_id for j in backend.list_jobs()]


def test_vertex_cancel_and_missing(gcs_emulator: Emulator, trainer_sdist: Path) -> None:
    gcs_emulator.stage(trainer_sdist, LOCAL_PACKAGE)
    backend = VertexBackend(settings(gcs_emulator))
    backend.create_job(training_job("vertex_cancel", LOCAL_PACKAGE, "--sleep", "120"))
    # A fresh backend (a later command) finds the job by its display name.
    later = VertexBackend(settings(gcs_emulator))
    wait_until(lambda: later.get_job("vertex_cancel").state == JobState.RUNNING)
    later.cancel_job("vertex_cancel")
    final, _ = follow(later, "vertex_cancel")
    assert final.state == JobState.CANCELLED
    with pytest.raises(NotFound):
        later.get_job("vertex_nobody")


def test_vertex_refuses_before_sending(gcs_emulator: Emulator) -> None:
    backend = VertexBackend(settings(gcs_emulator))
    job = training_job("vertex_refused", LOCAL_PACKAGE, scheduling={"priority": 1})
    assert [p.path for p in backend.unsupported(job)] == ["trainingInput.scheduling.priority"]
    with pytest.raises(ValidationFailed):
        backend.create_job(job)
    with pytest.raises(NotFound):
        backend.get_job("vertex_refused")


def test_vertex_needs_a_region(gcs_emulator: Emulator) -> None:
    from aiptrain.errors import UsageError

    backend = VertexBackend(settings(gcs_emulator, region=None))
    assert backend.request_body(training_job("r", LOCAL_PACKAGE))["displayName"] == "r"  # dry-run works
    with pytest.raises(UsageError, match="region"):
        backend.get_job("r")
