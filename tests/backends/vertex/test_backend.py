"""VertexBackend against the emulator: real HTTP, real engine, real trainer, its log read back through logging
v2 (the emulator, the staged package and the job helpers: tests/fixtures/backend_jobs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiptrain._backends.vertex.backend import VertexBackend
from aiptrain._job.spec import JobState
from aiptrain.errors import AlreadyExists, NotFound, ValidationFailed
from tests.fixtures.backend_jobs import (
    LOCAL_PACKAGE,
    client_home,
    follow,
    gcs_emulator,
    gcs_package,
    messages,
    settings,
    training_job,
)
from tests.fixtures.emulator import Emulator, wait_until

__all__ = ["client_home", "gcs_emulator", "gcs_package"]


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
