"""`import aiptrain` on the ray backend: submit, wait (with the log lines as they come), logs, get,
list and cancel of jobs on the session's real two-node Ray cluster, as a notebook calls them."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiptrain
from aiptrain._job.logs import LogEntry
from aiptrain._job.spec import JobState
from tests.backends.ray.cluster import RayCluster
from tests.backends.ray.harness import wait_until

pytestmark = pytest.mark.ray_cluster

RAY_TRAINER = Path(__file__).parent / "trainers" / "raytrainer"


def _held_by(cluster: RayCluster, prefix: str) -> list[str]:
    """The live actors and placement groups whose names start with `prefix`."""
    from ray.util.state import list_actors, list_placement_groups

    actors = [a.name or "" for a in list_actors(address=cluster.address, filters=[("state", "=", "ALIVE")])
              if (a.name or "").startswith(prefix)]
    groups = [g.name or "" for g in list_placement_groups(address=cluster.address, detail=True)
              if (g.name or "").startswith(prefix) and g.state != "REMOVED"]
    return actors + groups


def _submit(client: aiptrain.Client, job_id: str, steps: int) -> None:
    client.submit(job_id, package_path=RAY_TRAINER, module_name="raytrainer.task", runtime_version="2.11",
                  region="us-central1", job_dir=f"gs://ray-api/{job_id}", labels={"via": "api"},
                  args=["--steps", str(steps), "--step-seconds", "0.2"])


def test_the_python_api_on_the_ray_backend(on_cluster: RayCluster) -> None:
    client = aiptrain.Client(backend="ray", ray_address=on_cluster.address, ray_resource_scale=0.25)
    _submit(client, "ray_api_ok", steps=2)
    streamed: list[LogEntry] = []
    # Runtime 2.11 names the primary `chief` in TF_CONFIG.
    ended = client.wait("ray_api_ok", timeout=300, on_entry=streamed.append)
    assert ended.state == JobState.SUCCEEDED, ended.error_message
    assert "[chief:0] step 2" in [entry.message for entry in client.logs("ray_api_ok")]
    assert "[chief:0] done" in [entry.message for entry in streamed]
    assert client.get("ray_api_ok").labels == {"via": "api"}

    _submit(client, "ray_api_cancel", steps=0)  # steps until it is stopped
    with pytest.raises(aiptrain.WaitTimedOut):
        client.wait("ray_api_cancel", timeout=0.5)
    client.cancel("ray_api_cancel")
    assert client.wait("ray_api_cancel", timeout=120).state == JobState.CANCELLED
    # Cancelled while Ray was still starting it, the job leaves no replica actor or placement group behind.
    wait_until(lambda: _held_by(on_cluster, "aiptrain-ray_api_cancel") == [], "the cancelled job's actors and bundles",
               timeout=60)
    with pytest.raises(aiptrain.JobAlreadyFinished):
        client.cancel("ray_api_cancel")
    assert {"ray_api_ok", "ray_api_cancel"} <= {job.job_id for job in client.list(filter="labels.via=api")}
    with pytest.raises(aiptrain.NotFound):
        client.get("ray_api_nobody")
