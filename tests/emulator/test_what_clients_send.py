"""What Google's own clients send and the services took, against a real emulator over plain
googleapiclient: enum names in any case, a zero-count accelerator, a failure worded as the API
the job was created through words it, and a container job on a machine without an engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from tests.fixtures.emulator import Emulator, error_of, ml_job_when_done, wait_until

PROJECT = "quirks-project"
PACKAGE_URI = "gs://quirks-bucket/packages/trainer.tar.gz"
PARENT = f"projects/{PROJECT}/locations/us-central1"
NO_ACCELERATOR = {"count": "0", "type": "ACCELERATOR_TYPE_UNSPECIFIED"}


def client(api: str, version: str, emulator: Emulator) -> Any:
    return discovery.build(api, version, static_discovery=True, cache_discovery=False,
                           credentials=emulator.credentials(), client_options={"api_endpoint": emulator.url})


@pytest.fixture(scope="module")
def staged(emulator: Emulator, trainer_sdist: Path) -> Emulator:
    emulator.stage(trainer_sdist, PACKAGE_URI)
    return emulator


def ml_body(job_id: str, *args: str, **training_input: Any) -> dict[str, Any]:
    return {"jobId": job_id, "trainingInput": {
        "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [PACKAGE_URI],
        "pythonModule": "trainer.task", "args": list(args), **training_input}}




def log_lines(emulator: Emulator, job_label: str) -> list[dict[str, Any]]:
    logging = client("logging", "v2", emulator)
    entries: list[dict[str, Any]] = logging.entries().list(body={
        "resourceNames": [f"projects/{PROJECT}"], "pageSize": 1000,
        "filter": f'resource.type="ml_job" AND resource.labels.job_id="{job_label}"'}).execute()["entries"]
    return entries


def test_tensorflow_clouds_body_is_taken_and_stored_canonical(staged: Emulator) -> None:
    # tensorflow-cloud 0.1.16 asks for a CPU machine so: a lower-case tier, a zero-count accelerator.
    ml = client("ml", "v1", staged).projects().jobs()
    body = ml_body("tfc_shape", scaleTier="custom", masterType="n1-standard-4",
                   masterConfig={"acceleratorConfig": NO_ACCELERATOR})
    created = ml.create(parent=f"projects/{PROJECT}", body=body).execute()
    assert created["trainingInput"]["scaleTier"] == "CUSTOM"
    assert "masterConfig" not in created["trainingInput"] or "acceleratorConfig" not in created[
        "trainingInput"]["masterConfig"]
    assert ml_job_when_done(ml, PROJECT, "tfc_shape")["state"] == "SUCCEEDED"


def test_an_ml_v1_failure_keeps_ml_v1s_words(staged: Emulator) -> None:
    ml = client("ml", "v1", staged).projects().jobs()
    ml.create(parent=f"projects/{PROJECT}", body=ml_body("ml_fails", "--exit-code", "3")).execute()
    job = ml_job_when_done(ml, PROJECT, "ml_fails")
    assert job["state"] == "FAILED"
    assert job["errorMessage"].startswith("The replica master 0 exited with a non-zero status of 3. ")
    assert "Termination reason" not in job["errorMessage"]


def test_a_vertex_failure_is_worded_as_vertex_worded_it(staged: Emulator) -> None:
    jobs = client("aiplatform", "v1", staged).projects().locations().customJobs()
    package = {"executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
               "packageUris": [PACKAGE_URI], "pythonModule": "trainer.task", "args": ["--exit-code", "3"]}
    # Enum names in any case, and a zero-count accelerator, as on ml v1.
    machine = {"machineType": "n1-standard-4", "acceleratorType": "accelerator_type_unspecified",
               "acceleratorCount": 0}
    created = jobs.create(parent=PARENT, body={"displayName": "fails", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": machine, "replicaCount": "1", "pythonPackageSpec": package}]}}).execute()
    assert created["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "ACCELERATOR_TYPE_UNSPECIFIED"

    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = jobs.get(name=created["name"]).execute()
        return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None

    final = wait_until(done)
    assert final["state"] == "JOB_STATE_FAILED", final
    headline = "The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error."
    assert final["error"]["message"].startswith(headline + " ")
    said = [entry.get("textPayload", "") for entry in log_lines(staged, created["name"].rsplit("/", 1)[1])]
    assert headline in said
    assert not any("The replica master 0" in line for line in said)


@pytest.mark.parametrize("api", ["ml", "aiplatform"])
def test_a_container_job_without_an_engine_is_a_failed_precondition(staged: Emulator, api: str) -> None:
    # The suite's own environment has no container engine that answers (its daemon is opt-in).
    with pytest.raises(HttpError) as raised:
        if api == "ml":
            client("ml", "v1", staged).projects().jobs().create(parent=f"projects/{PROJECT}", body={
                "jobId": "no_engine", "trainingInput": {"region": "us-central1", "scaleTier": "BASIC",
                                                        "masterConfig": {"imageUri": "gcr.io/p/trainer:1"}}}).execute()
        else:
            client("aiplatform", "v1", staged).projects().locations().customJobs().create(parent=PARENT, body={
                "displayName": "no engine", "jobSpec": {"workerPoolSpecs": [{
                    "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                    "containerSpec": {"imageUri": "gcr.io/p/trainer:1"}}]}}).execute()
    error = error_of(raised)
    assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
    assert "custom containers need a container engine" in error["message"] and "Podman" in error["message"]
