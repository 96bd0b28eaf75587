"""Helpers of the Ray tests: the real command line, the backend, its logs, the state API."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.ray.backend import RayBackend
from aiptrain._backends.ray.driver import actor_name
from tests.backends.ray.cluster import RayCluster
from tests.fixtures.timed_run import run_or_explain

JOB_TIMEOUT = 300


def aiptrain(*args: str, timeout: float = JOB_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return run_or_explain([sys.executable, "-m", "aiptrain", *args], timeout=timeout, env=dict(os.environ))


def backend(cluster: RayCluster) -> RayBackend:
    return RayBackend(BackendSettings(project="local-project", ray_address=cluster.address))


def log_text(cluster: RayCluster, job_id: str) -> str:
    return "\n".join(f"{e.task_name}\t{e.severity}\t{e.message}" for e in backend(cluster).read_logs(job_id,
                                                                                                         limit=100000))


def wait_until(condition: Callable[[], bool], what: str, timeout: float = JOB_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def actor_nodes(cluster: RayCluster, job_id: str, tasks: list[str], trial_id: str | None = None) -> dict[str, str]:
    """Task name -> node id of its replica's actor, from Ray's state API."""
    from ray.util.state import list_actors

    nodes = {}
    for task in tasks:
        name = actor_name(job_id, task, trial_id)
        found = list_actors(address=cluster.address, filters=[("name", "=", name)], detail=True)
        assert found, f"no actor for {task}"
        node_id = found[0].node_id
        assert node_id is not None, f"the actor for {task} is on no node"
        nodes[task] = node_id
    return nodes


def cluster_node_ids(cluster: RayCluster) -> set[str]:
    from ray.util.state import list_nodes

    return {node.node_id for node in list_nodes(address=cluster.address) if node.state == "ALIVE"}


