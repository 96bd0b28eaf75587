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

from tests.e2e.gcloud.harness import REGION, GcloudSession, Result, gcloud_session
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.engine import wait_until
from tests.fixtures.gcs import FakeGcsServer

pytestmark = [pytest.mark.containers,
              pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not on PATH")]


def _ended(gcloud: GcloudSession, numeric: str) -> dict[str, Any] | None:
    job: dict[str, Any] = ok(gcloud.run("ai", "custom-jobs", "describe", numeric, "--format", "json")).json()
    return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None


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
        "--epochs", "2"))
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
    described = wait_until(lambda: _ended(gcloud, numeric), timeout=120, what="the custom job to end")
    assert described["state"] == "JOB_STATE_SUCCEEDED", described
    # gcloud's stream-logs reads the job's state once, when it starts: asked after the end, it ends.
    streamed = ok(gcloud.run("ai", "custom-jobs", "stream-logs", numeric, "--polling-interval", "1")).stdout
    assert "workerpool1-1\thost=worker-replica-1" in streamed
    entries = json.loads(ok(gcloud.run("logging", "read", f'resource.labels.job_id="{numeric}"', "--format", "json",
                                       "--freshness", "1d")).stdout)
    texts = [entry.get("textPayload", "") for entry in entries]
    # Vertex AI's args go to the image's ENTRYPOINT (here `sh -c`), with no --job-dir added.
    assert "host=master-replica-0 model= args=--x=1" in texts
    spec = json.loads(next(text for text in texts if text.startswith('{"cluster"')))
    assert spec["cluster"]["workerpool1"] == ["worker-replica-0:2222", "worker-replica-1:2222"]
