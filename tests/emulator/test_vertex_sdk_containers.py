"""The Vertex AI SDK's `CustomContainerTrainingJob` against a real `local serve` whose jobs run on
the suite's Docker daemon (the `containers` marker): the pipeline's backing CustomJob runs the image
with the SDK's command, args and variables, on either transport, and a container that fails fails
the pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.emulator import Emulator, running_emulator
from tests.fixtures.sdk_over_grpc import run_over_grpc

aiplatform = pytest.importorskip("google.cloud.aiplatform")

pytestmark = pytest.mark.containers

PROJECT = "sdk-containers"
LOCATION = "us-central1"
# The image's ENTRYPOINT is `sh -c`; the SDK's `command` replaces it, and its args follow ($0 is "sh").
SCRIPT = 'echo "host=$(hostname) colour=$COLOUR model=$AIP_MODEL_DIR args=$*"; exit ${EXIT_CODE:-0}'


@pytest.fixture
def emulator_on_docker(tmp_path: Path, docker: SuiteDocker) -> Iterator[Emulator]:
    from google.oauth2.credentials import Credentials

    env = {"DOCKER_HOST": docker.host, "AIPTRAIN_CONTAINER_ENGINE": "docker"}
    with running_emulator(tmp_path / "home", env=env, grpc=True) as server:
        aiplatform.init(project=PROJECT, location=LOCATION, api_endpoint=server.url.rstrip("/"),
                        api_transport="rest", credentials=Credentials(token=server.token),
                        staging_bucket="gs://sdk-containers/staging")
        yield server


def _backing_job(job: object) -> str:
    return str(job.gca_resource.training_task_metadata["backingCustomJob"])  # type: ignore[attr-defined]


def _output(emulator: Emulator, backing: str) -> list[str]:
    return [entry.message for entry in emulator.engine().logs(PROJECT, f"customjob_{backing.rsplit('/', 1)[-1]}")]


def test_custom_container_training_job_runs_the_image(emulator_on_docker: Emulator, images: SuiteImages) -> None:
    job = aiplatform.CustomContainerTrainingJob(display_name="sdk-container", container_uri=images["shell"],
                                                command=["sh", "-c", SCRIPT, "sh"])
    model = job.run(args=["--epochs", "2"], replica_count=1, machine_type="n1-standard-4",
                    base_output_dir="gs://sdk-containers/out", environment_variables={"COLOUR": "teal"})
    assert model is None  # no model to upload
    assert job.state == aiplatform.gapic.PipelineState.PIPELINE_STATE_SUCCEEDED
    backing = _backing_job(job)
    custom_job = aiplatform.CustomJob.get(backing)
    assert custom_job.state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
    container = custom_job.job_spec.worker_pool_specs[0].container_spec
    assert container.image_uri == images["shell"]
    assert list(container.command) == ["sh", "-c", SCRIPT, "sh"]
    assert "host=master-replica-0 colour=teal model=gs://sdk-containers/out/model/ args=--epochs 2" in _output(
        emulator_on_docker, backing)


def test_a_failing_container_fails_the_pipeline(emulator_on_docker: Emulator, images: SuiteImages) -> None:
    job = aiplatform.CustomContainerTrainingJob(display_name="sdk-container-fails", container_uri=images["shell"],
                                                command=["sh", "-c", SCRIPT, "sh"])
    with pytest.raises(RuntimeError, match="Training failed"):
        job.run(replica_count=1, machine_type="n1-standard-4", base_output_dir="gs://sdk-containers/fails",
                environment_variables={"EXIT_CODE": "3"})
    assert job.state == aiplatform.gapic.PipelineState.PIPELINE_STATE_FAILED
    assert "exited with a non-zero status of 3" in job.gca_resource.error.message
    assert aiplatform.CustomJob.get(_backing_job(job)).state == aiplatform.gapic.JobState.JOB_STATE_FAILED


def test_custom_container_training_job_runs_the_image_over_grpc(emulator_on_docker: Emulator,
                                                                images: SuiteImages) -> None:
    """The SDK's default transport, in a process of its own (tests/fixtures/sdk_over_grpc.py)."""
    report = run_over_grpc(emulator_on_docker, "container_job", {
        "project": PROJECT, "location": LOCATION, "staging_bucket": "gs://sdk-containers/staging",
        "display_name": "sdk-container-grpc", "image": images["shell"], "command": ["sh", "-c", SCRIPT, "sh"],
        "args": ["--epochs", "3"], "base_output_dir": "gs://sdk-containers/grpc", "env": {"COLOUR": "plum"}})
    assert report["model"] is None  # no model to upload
    assert report["state"] == "PIPELINE_STATE_SUCCEEDED"
    assert report["backing_state"] == "JOB_STATE_SUCCEEDED"
    assert report["image_uri"] == images["shell"]
    assert report["command"] == ["sh", "-c", SCRIPT, "sh"]
    assert report["listed"]
    assert "host=master-replica-0 colour=plum model=gs://sdk-containers/grpc/model/ args=--epochs 3" in _output(
        emulator_on_docker, report["backing"])
    # The same pipeline, read over REST by this process: one store behind both transports.
    assert aiplatform.CustomJob.get(report["backing"]).state == aiplatform.gapic.JobState.JOB_STATE_SUCCEEDED
