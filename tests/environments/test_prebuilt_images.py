"""Google's pre-built training images run as environments (prebuilt_images.yaml): a job naming
one with a Python package gets an environment of the image's packages, built by the runtime
versions' builder as of the image's day, its package installed and its module run, with no
container engine; the same image under Vertex AI's name is the same environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from googleapiclient import discovery

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._packaging import build_package
from tests.fixtures.emulator import running_emulator, wait_until

from .conftest import TRAINERS, describe, submit

pytestmark = [pytest.mark.slow, pytest.mark.runtime_envs]

PYTORCH = "gcr.io/cloud-ml-public/training/pytorch-cpu.1-4"
SKLEARN = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.0-23:latest"


@pytest.fixture
def image_envs(monkeypatch: pytest.MonkeyPatch, shared_envs_dir: Path, engine: LocalJobEngine) -> Path:
    """The session's environments directory, replicas in built environments, and no engine at all."""
    monkeypatch.delenv("AIPTRAIN_LOCAL_PYTHON", raising=False)
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(shared_envs_dir))
    monkeypatch.setenv("AIPTRAIN_CONTAINER_ENGINE", "/nonexistent/docker")  # pre-built images need none
    return shared_envs_dir


def _run(home: Path, job_id: str, trainer: str, image: str) -> tuple[str, dict[str, Any]]:
    """Submit the trainer on `image` (its result in gs://images/JOB_ID), wait: (its log, its result)."""
    result = submit(job_id, trainer, "--master-image-uri", image, "--job-dir", f"gs://images/{job_id}")
    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-4000:]
    report: dict[str, Any] = json.loads(home.joinpath("storage", "images", job_id, "result.json").read_text())
    return logs, report


def test_the_pre_built_pytorch_image_runs_the_package_on_its_torch_and_python(image_envs: Path,
                                                                              home: Path) -> None:
    logs, report = _run(home, "pt14", "prebuilt_pytorch", PYTORCH)
    assert f"The pre-built image {PYTORCH} (PyTorch 1.4) runs in an environment of its packages on Python 3.7" in logs
    assert "nearest set that installs" in logs and "as of 2020-04-20" in logs
    assert report["torch"] == "1.4.0" and report["python"] == "3.7"
    assert float(report["last_loss"]) < float(report["first_loss"]) / 10  # it trained
    assert report["tqdm"] <= "4.45.0"  # the package's own open requirement, as of the image's day
    assert home.joinpath("storage", "images", "pt14", "model.pt").stat().st_size > 0
    rendezvous = report["rendezvous"]  # torch.distributed's env://, as the service set it on these images
    assert (rendezvous["WORLD_SIZE"], rendezvous["RANK"], rendezvous["MASTER_ADDR"]) == ("1", "0", "localhost")
    assert int(rendezvous["MASTER_PORT"]) > 0
    described = describe("pt14")
    assert "masterConfig" in described["trainingInput"] and "runtimeVersion" not in described["trainingInput"]


def test_vertex_pre_built_scikit_learn_image_runs_the_package_with_its_scikit_learn(image_envs: Path,
                                                                                      home: Path) -> None:
    logs, report = _run(home, "sk023", "prebuilt_sklearn", SKLEARN)
    assert f"The pre-built image {SKLEARN} (scikit-learn 0.23)" in logs
    assert str(report["sklearn"]).startswith("0.23.") and report["python"] == "3.7"
    assert report["accuracy"] == 1.0
    assert str(report["pandas"]) < "1.2"  # pandas 1.2.0 came 2020-12-26, after the image's day


def test_a_vertex_python_package_on_a_pre_built_executor_image_runs_through_local_serve(
        image_envs: Path, tmp_path: Path) -> None:
    sdist = build_package(TRAINERS / "prebuilt_sklearn" / "trainer", cache_dir=tmp_path / "sdists").path
    image = "europe-docker.pkg.dev/vertex-ai/training/scikit-learn-cpu.0-23:latest"  # gcloud's name, another region
    with running_emulator(tmp_path / "served") as served:
        uri = served.stage(sdist, f"gs://served-bucket/packages/{sdist.name}")
        jobs = discovery.build("aiplatform", "v1", static_discovery=True, cache_discovery=False,
                               credentials=served.credentials(),
                               client_options={"api_endpoint": served.url}).projects().locations().customJobs()
        package = {"executorImageUri": image, "packageUris": [uri], "pythonModule": "trainer.task",
                   "args": ["--job-dir", "gs://served-bucket/vertex-sk"]}
        body = {"displayName": "sklearn on its image", "jobSpec": {"workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": package}]}}
        created = jobs.create(parent="projects/envs-project/locations/us-central1", body=body).execute()

        def finished() -> dict[str, Any] | None:
            job: dict[str, Any] = jobs.get(name=created["name"]).execute()
            return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") else None

        job = wait_until(finished, timeout=600)
        assert job["state"] == "JOB_STATE_SUCCEEDED", job
        assert job["jobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["executorImageUri"] == image
        report = json.loads((served.storage / "served-bucket" / "vertex-sk" / "result.json").read_text())
        assert str(report["sklearn"]).startswith("0.23.")  # the image's scikit-learn, not a runtime version's
