"""A Vertex job's resource name is spelled once, whether it carries the project's ID or number."""

from __future__ import annotations

from aiptrain._emulator.vertex_jobs import CUSTOM_JOBS, TUNING_JOBS, VertexJobRecord, vertex_job_name


def test_the_resource_name_of_a_job() -> None:
    assert (vertex_job_name("p", "us-central1", CUSTOM_JOBS, "1234567890123456789")
            == "projects/p/locations/us-central1/customJobs/1234567890123456789")
    assert (vertex_job_name("123456789012", "europe-west4", TUNING_JOBS, "42")
            == "projects/123456789012/locations/europe-west4/hyperparameterTuningJobs/42")


def test_a_record_is_named_with_its_project_location_and_collection() -> None:
    record = VertexJobRecord(numeric_id="42", project="my-project", location="asia-east1", engine_job_id="x",
                             created_ns=0, request={}, collection=TUNING_JOBS)
    assert record.name == "projects/my-project/locations/asia-east1/hyperparameterTuningJobs/42"
