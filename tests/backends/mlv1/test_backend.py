"""MlV1Backend against the emulator: real HTTP, real engine, real trainer, its log read back through logging
v2 (the emulator, the staged package and the job helpers: tests/fixtures/backend_jobs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiptrain._backends.mlv1.backend import MlV1Backend
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
