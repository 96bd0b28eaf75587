"""Container jobs on a real two-node Ray cluster whose nodes offer the suite's Docker daemon.

The cluster is this module's own (its nodes declare the container resource and reach the suite's
daemon), so these tests carry the `containers` marker, not `ray_cluster`.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.ray.plan import CONTAINER_RESOURCE
from tests.backends.ray.cluster import RayCluster, start_cluster
from tests.backends.ray.harness import actor_nodes, aiptrain, log_text
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.engine import wait_until

pytestmark = [pytest.mark.containers, pytest.mark.slow]


@pytest.fixture(scope="module")
def ray_with_docker(suite_docker_daemon: SuiteDocker) -> Iterator[RayCluster]:
    temp_dir = Path(tempfile.mkdtemp(prefix="aiprc-"))  # short: Ray's socket paths are limited
    cluster = start_cluster(temp_dir, resources={CONTAINER_RESOURCE: 1000},
                            env={"DOCKER_HOST": suite_docker_daemon.host, "AIPTRAIN_CONTAINER_ENGINE": "docker"})
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_each_replica_runs_its_container_on_its_node(
    ray_with_docker: RayCluster, docker: SuiteDocker, images: SuiteImages, isolated_environment: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = isolated_environment
    monkeypatch.setenv("AIPTRAIN_RAY_ADDRESS", ray_with_docker.address)
    script = ('task=$(echo $TF_CONFIG | sed \'s/.*\\"task\\": {\\([^}]*\\)}.*/\\1/\'); echo "task=$task"; '
              'echo "args=$*"; mkdir -p "$1"; echo written > "$1/$(echo $task | sed \'s/[^a-z0-9]//g\').txt"')
    job_id = "ray_containers"
    submitted = aiptrain("jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
                         "--master-image-uri", images["shell"], "--scale-tier", "custom",
                         "--master-machine-type", "n1-standard-4", "--worker-machine-type", "n1-standard-4",
                         "--worker-count", "1", "--ray-resource-scale", "0.25", "--stream-logs",
                         "--", script, "--out", "gs://ray-jobs/containers")
    assert submitted.returncode == 0, submitted.stderr
    log = log_text(ray_with_docker, job_id)
    assert 'task="type": "worker", "index": 0' in log and 'task="type": "master", "index": 0' in log
    # gs:// became the nodes' shared storage, mounted at the same path in each container.
    written = sorted(path.name for path in (home / "storage" / "ray-jobs" / "containers").glob("*.txt"))
    assert written == ["typemasterindex0.txt", "typeworkerindex0.txt"], log
    nodes = actor_nodes(ray_with_docker, job_id, ["master-replica-0", "worker-replica-0"])
    assert len(set(nodes.values())) == 2  # spread over both nodes, each running its own container
    # `jobs describe` names each replica's image with its id, its container and its node.
    image_id = docker.output("image", "inspect", "--format", "{{.Id}}", images["shell"]).strip()
    described = aiptrain("jobs", "describe", job_id, "--backend", "ray")
    assert described.returncode == 0, described.stderr
    ran_in = described.stderr.split("Ran in:\n", 1)[-1].splitlines()  # notes go to stderr, as on local
    for task in ("master-replica-0", "worker-replica-0"):
        line = next((line for line in ran_in if line.startswith(f"  {task}: ")), "")
        assert line.startswith(f"  {task}: image {images['shell']} ({image_id}), container "), described.stderr
        assert " on Docker (node " in line and f"({nodes[task][:8]}))" in line, described.stderr
    assert "Ran in: [" not in log  # the driver's line for describe stays out of the job's log
    left = docker.output("ps", "--all", "--filter", "label=aiptrain.job", "--format", "{{.Names}}")
    assert left == ""


def test_a_vertex_container_job_created_through_local_serve_runs_its_containers_on_the_nodes(
    ray_with_docker: RayCluster, docker: SuiteDocker, images: SuiteImages, tmp_path: Path,
) -> None:
    """`local serve --backend ray`: a CustomJob of two container pools, created with googleapiclient,
    runs each replica's container on the cluster's nodes, with Vertex's job ID and task names."""
    from googleapiclient import discovery

    from tests.fixtures.emulator import start_ray_server

    server = start_ray_server(tmp_path / "home", ray_with_docker.address)
    try:
        def api(name: str, version: str) -> Any:
            return discovery.build(name, version, static_discovery=True, cache_discovery=False,
                                   credentials=server.credentials(), client_options={"api_endpoint": server.url})

        pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": {
            "imageUri": images["shell"], "args": ['echo "job=$CLOUD_ML_JOB_ID"']}}
        parent = "projects/team-project/locations/us-central1"
        created = api("aiplatform", "v1").projects().locations().customJobs().create(parent=parent, body={
            "displayName": "served containers", "jobSpec": {"workerPoolSpecs": [pool, pool]}}).execute()
        numeric = created["name"].rsplit("/", 1)[1]

        def ended() -> dict[str, Any] | None:
            job: dict[str, Any] = api("aiplatform", "v1").projects().locations().customJobs().get(
                name=created["name"]).execute()
            return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") else None

        assert wait_until(ended, timeout=240)["state"] == "JOB_STATE_SUCCEEDED"
        entries = api("logging", "v2").entries().list(body={
            "resourceNames": ["projects/team-project"], "pageSize": 1000,
            "filter": f'resource.type="ml_job" AND resource.labels.job_id="{numeric}"'}).execute()["entries"]
        said = {e["resource"]["labels"]["task_name"]: e["textPayload"] for e in entries
                if e["textPayload"].startswith("job=")}
        assert said == {"workerpool0-0": f"job={numeric}", "workerpool1-0": f"job={numeric}"}, entries
        nodes = {match.group(1) for match in (re.search(r" runs on node \S+ \((\w+)\)", e["textPayload"])
                                              for e in entries) if match}
        assert len(nodes) == 2, nodes
    finally:
        server.stop()
    left = docker.output("ps", "--all", "--filter", "label=aiptrain.job", "--format", "{{.Names}}")
    assert left == ""
