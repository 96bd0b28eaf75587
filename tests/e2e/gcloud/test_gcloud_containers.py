"""Google's gcloud runs container jobs through `aiptrain local serve`: `ai-platform jobs submit training
--master-image-uri` (ml v1) and `ai custom-jobs create` with a container image (Vertex AI).

These tests need the suite's Docker daemon as much as gcloud: they carry the `containers` marker
(their emulator is their own, pointed at that daemon) and skip where gcloud is not installed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gcloud.harness import FAST_POLLING, REGION, GcloudSession, Result, gcloud_session, wait_vertex_end
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.gcs import FakeGcsServer

pytestmark = [pytest.mark.containers,
              pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not on PATH")]


def ok(result: Result) -> Result:
    assert result.returncode == 0, str(result)
    return result


@pytest.fixture
def gcloud_on_docker(tmp_path: Path, fake_gcs_server: FakeGcsServer, docker: SuiteDocker) -> Iterator[GcloudSession]:
    server_env = {"DOCKER_HOST": docker.host, "AIPTRAIN_CONTAINER_ENGINE": "docker"}
    with gcloud_session(tmp_path / "gcloud", fake_gcs_server.endpoint, server_env) as session:
        yield session


def test_ai_platform_submit_with_a_master_image(gcloud_on_docker: GcloudSession, images: SuiteImages) -> None:
    gcloud = gcloud_on_docker
    streamed = ok(gcloud.run(
        "ai-platform", "jobs", "submit", "training", "g_image", "--region", REGION, "--master-image-uri",
        images["shell"], "--stream-logs", "--", 'echo "from $(hostname): $*"; echo "job=$CLOUD_ML_JOB_ID"', "x",
        "--epochs", "2", env=FAST_POLLING))
    assert "from master-replica-0: --epochs 2" in streamed.stderr + streamed.stdout
    described = ok(gcloud.run("ai-platform", "jobs", "describe", "g_image", "--format", "json")).json()
    assert described["state"] == "SUCCEEDED"
    assert described["trainingInput"]["masterConfig"]["imageUri"] == images["shell"]


def test_ai_custom_jobs_create_with_a_container_image(gcloud_on_docker: GcloudSession, images: SuiteImages) -> None:
    gcloud = gcloud_on_docker
    pool = f"machine-type=n1-standard-4,replica-count=1,container-image-uri={images['shell']}"
    script = 'echo "host=$(hostname) model=$AIP_MODEL_DIR args=$*"; echo "$CLUSTER_SPEC"'
    created = ok(gcloud.run("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "v_container",
                            "--worker-pool-spec", pool, "--worker-pool-spec", pool.replace("replica-count=1",
                                                                                          "replica-count=2"),
                            f"--args={script},first,--x=1", "--format", "json")).json()
    numeric = created["name"].rsplit("/", 1)[1]
    described = wait_vertex_end(gcloud, "custom-jobs", numeric, timeout=120)
    assert described["state"] == "JOB_STATE_SUCCEEDED", described
    streamed = ok(gcloud.run("ai", "custom-jobs", "stream-logs", numeric, "--polling-interval", "1")).stdout
    assert "workerpool1-1\thost=worker-replica-1" in streamed
    entries = json.loads(ok(gcloud.run("logging", "read", f'resource.labels.job_id="{numeric}"', "--format", "json",
                                       "--freshness", "1d")).stdout)
    texts = [entry.get("textPayload", "") for entry in entries]
    # Vertex AI's args go to the image's ENTRYPOINT (here `sh -c`), with no --job-dir added.
    assert "host=master-replica-0 model= args=--x=1" in texts
    spec = json.loads(next(text for text in texts if text.startswith('{"cluster"')))
    assert spec["cluster"]["workerpool1"] == ["worker-replica-0:2222", "worker-replica-1:2222"]


def test_each_container_pool_gets_its_own_variables(gcloud_on_docker: GcloudSession, images: SuiteImages,
                                                    tmp_path: Path) -> None:
    """A `--config` job spec whose pools carry `containerSpec.env`: each pool's replicas see their own
    values, and the service's variables (here CLOUD_ML_JOB_ID) stay the service's."""
    gcloud = gcloud_on_docker
    script = 'echo "$(hostname) colour=$COLOUR job=$CLOUD_ML_JOB_ID"'

    def pool(count: int, colour: str) -> dict[str, Any]:
        return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": count,
                "containerSpec": {"imageUri": images["shell"], "args": [script],
                                  "env": [{"name": "COLOUR", "value": colour},
                                          {"name": "CLOUD_ML_JOB_ID", "value": "overridden"}]}}

    config = tmp_path / "spec.yaml"
    config.write_text(json.dumps({"workerPoolSpecs": [pool(1, "red"), pool(1, "blue")]}))
    created = ok(gcloud.run("ai", "custom-jobs", "create", "--region", REGION, "--display-name", "v_env",
                            "--config", str(config), "--format", "json")).json()
    numeric = created["name"].rsplit("/", 1)[1]
    described = wait_vertex_end(gcloud, "custom-jobs", numeric, timeout=120)
    assert described["state"] == "JOB_STATE_SUCCEEDED", described
    assert [pool["containerSpec"]["env"][0]["value"] for pool in described["jobSpec"]["workerPoolSpecs"]] == [
        "red", "blue"]
    entries = json.loads(ok(gcloud.run("logging", "read", f'resource.labels.job_id="{numeric}"', "--format", "json",
                                       "--freshness", "1d")).stdout)
    texts = [entry.get("textPayload", "") for entry in entries]
    said = sorted(text for text in texts if text.startswith(("master-replica-0 colour=", "worker-replica-0 colour=")))
    assert [line.rsplit(" job=", 1)[0] for line in said] == ["master-replica-0 colour=red",
                                                              "worker-replica-0 colour=blue"], texts
    assert all(not line.endswith("job=overridden") and not line.endswith("job=") for line in said), said
