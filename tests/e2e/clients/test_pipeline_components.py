"""Vertex Pipelines' CustomJob launcher (google-cloud-pipeline-components 2.22), run exactly as a
pipeline's container runs it, `python -m google_cloud_pipeline_components.container.v1.custom_job.launcher`,
with nothing but `aiptrain local env`'s environment: it names `us-central1-aiplatform.googleapis.com`
itself, over gRPC, and finds its credentials through GOOGLE_APPLICATION_CREDENTIALS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clients.conftest import PACKAGE_URI, PROJECT, ProxiedEmulator
from tests.fixtures.client_venvs import PIPELINE_COMPONENTS, BuiltVenv, ensure_venv

pytestmark = pytest.mark.slow

LAUNCHER = "google_cloud_pipeline_components.container.v1.custom_job.launcher"
LOCATION = "us-central1"


@pytest.fixture(scope="module")
def venv() -> BuiltVenv:
    return ensure_venv(PIPELINE_COMPONENTS)


def payload(display_name: str, *args: str) -> str:
    """A CustomJob as a pipeline's CustomTrainingJobOp hands it to the launcher (proto field names)."""
    return json.dumps({"display_name": display_name, "job_spec": {"worker_pool_specs": [{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
        "python_package_spec": {"executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                                "package_uris": [PACKAGE_URI], "python_module": "trainer.task",
                                "args": list(args)}}]}})


def launch(venv: BuiltVenv, proxied: ProxiedEmulator, tmp_path: Path, display_name: str,
           *args: str) -> tuple[Any, dict[str, Any]]:
    resources = tmp_path / "outputs" / "gcp_resources"
    done = venv.run(["-m", LAUNCHER, "--type", "CustomJob", "--project", PROJECT, "--location", LOCATION,
                     "--payload", payload(display_name, *args), "--gcp_resources", str(resources)],
                    proxied.env, timeout=600, cwd=tmp_path)
    written: dict[str, Any] = json.loads(resources.read_text()) if resources.exists() else {}
    return done, written


def the_job(proxied: ProxiedEmulator, written: dict[str, Any]) -> Any:
    """The job the launcher recorded in gcp_resources, as the emulator has it."""
    (resource,) = written["resources"]
    assert resource["resourceType"] == "CustomJob"
    # The launcher records the job's URI on Google's host, with the name Vertex gave it.
    prefix = f"https://{LOCATION}-aiplatform.googleapis.com/v1/"
    assert resource["resourceUri"].startswith(prefix + "projects/")
    numeric_id = resource["resourceUri"].rsplit("/", 1)[1]
    engine = proxied.server.engine()
    records = {job_id: vertex_id for job_id, vertex_id in engine.vertex_job_ids(PROJECT).items()
               if vertex_id == numeric_id}
    (job_id,) = records
    return engine.get(PROJECT, job_id)


def test_the_launcher_runs_a_custom_job_to_success(venv: BuiltVenv, proxied_emulator: ProxiedEmulator,
                                                   tmp_path: Path) -> None:
    done, written = launch(venv, proxied_emulator, tmp_path, "pipeline step", "--lines", "2")
    assert done.returncode == 0, done.stderr[-4000:]
    job = the_job(proxied_emulator, written)
    assert job.state == "SUCCEEDED"


def test_a_failing_trainer_fails_the_step_as_on_vertex(venv: BuiltVenv, proxied_emulator: ProxiedEmulator,
                                                       tmp_path: Path) -> None:
    done, written = launch(venv, proxied_emulator, tmp_path, "failing step", "--exit-code", "3")
    assert done.returncode != 0
    # Vertex reports a trainer's failure with code 3, which the launcher takes for the user's error.
    assert "Job failed with value error in error state: JobState.JOB_STATE_FAILED" in done.stderr, \
        done.stderr[-4000:]
    job = the_job(proxied_emulator, written)
    assert job.state == "FAILED"
    assert job.error_message.startswith(
        "The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error.")
