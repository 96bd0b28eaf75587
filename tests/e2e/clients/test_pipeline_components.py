"""Vertex Pipelines' CustomJob launcher (google-cloud-pipeline-components 2.22), run exactly as a
pipeline's container runs it, `python -m google_cloud_pipeline_components.container.v1.custom_job.launcher`,
with nothing but `aiptrain local env`'s environment: it names `us-central1-aiplatform.googleapis.com`
itself, over gRPC, and finds its credentials through GOOGLE_APPLICATION_CREDENTIALS. The command is
docs/clients/vertex-pipelines.md's, as written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.clients.conftest import PACKAGE_URI, PROJECT, ProxiedEmulator, page_code, without_the_eval
from tests.fixtures.client_venvs import PIPELINE_COMPONENTS, BuiltVenv, client_environment, ensure_venv

pytestmark = pytest.mark.slow

LAUNCHER = "google_cloud_pipeline_components.container.v1.custom_job.launcher"
LOCATION = "us-central1"


@pytest.fixture(scope="module")
def venv() -> BuiltVenv:
    return ensure_venv(PIPELINE_COMPONENTS)


def written_resources(directory: Path) -> dict[str, Any]:
    resources = directory / "outputs" / "gcp_resources"
    written: dict[str, Any] = json.loads(resources.read_text()) if resources.exists() else {}
    return written


def the_job(proxied: ProxiedEmulator, written: dict[str, Any]) -> Any:
    """The job the launcher recorded in gcp_resources, as the emulator has it."""
    (resource,) = written["resources"]
    assert resource["resourceType"] == "CustomJob"
    # The launcher records the job's URI on Google's host, with the name Vertex gave it.
    assert resource["resourceUri"].startswith(f"https://{LOCATION}-aiplatform.googleapis.com/v1/projects/")
    numeric_id = resource["resourceUri"].rsplit("/", 1)[1]
    engine = proxied.server.engine()
    (job_id,) = [job_id for job_id, vertex_id in engine.vertex_job_ids(PROJECT).items() if vertex_id == numeric_id]
    return engine.get(PROJECT, job_id)


def test_the_pages_launcher_command_runs_a_custom_job_to_success(
        venv: BuiltVenv, proxied_emulator: ProxiedEmulator, tmp_path: Path) -> None:
    command = without_the_eval(page_code("vertex-pipelines.md", "all it needs is the environment", "bash"))
    assert PACKAGE_URI in command and f"--project {PROJECT}" in command, "the page changed: update this test"
    # `python` is the client venv's, as in the pipeline's container.
    env = client_environment({**proxied_emulator.env, "PATH": f"{venv.root / 'bin'}:/usr/bin:/bin"})
    done = subprocess.run(["bash", "-e", "-c", command], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert the_job(proxied_emulator, written_resources(tmp_path)).state == "SUCCEEDED"


def test_a_failing_trainer_fails_the_step_as_on_vertex(venv: BuiltVenv, proxied_emulator: ProxiedEmulator,
                                                       tmp_path: Path) -> None:
    payload = json.dumps({"display_name": "failing step", "job_spec": {"worker_pool_specs": [{
        "machine_spec": {"machine_type": "n1-standard-4"}, "replica_count": 1,
        "python_package_spec": {"executor_image_uri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                                "package_uris": [PACKAGE_URI], "python_module": "trainer.task",
                                "args": ["--exit-code", "3"]}}]}})
    done = venv.run(["-m", LAUNCHER, "--type", "CustomJob", "--project", PROJECT, "--location", LOCATION,
                     "--payload", payload, "--gcp_resources", str(tmp_path / "outputs" / "gcp_resources")],
                    proxied_emulator.env, timeout=600, cwd=tmp_path)
    assert done.returncode != 0
    # Vertex reports a trainer's failure with code 3, which the launcher takes for the user's error
    # (a ValueError naming the state's number: 5 is JOB_STATE_FAILED).
    assert "ValueError: Job failed with value error in error state: 5." in done.stderr, done.stderr[-4000:]
    job = the_job(proxied_emulator, written_resources(tmp_path))
    assert job.state == "FAILED"
    assert job.error_message.startswith(
        "The replica workerpool0-0 exited with a non-zero status of 3. Termination reason: Error.")
