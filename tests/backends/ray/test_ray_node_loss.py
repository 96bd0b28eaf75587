"""A node that goes away mid-run: its replica's actor is gone, and the job fails naming it.

It stops the second node of the session's cluster, so it runs after every other test of the
cluster (tests/backends/ray/conftest.py puts it last).
"""

from __future__ import annotations

import pytest

from aiptrain._replicas.replica_set import service_replica_name
from tests.backends.ray.harness import JOB_TIMEOUT, actor_nodes, aiptrain, backend, log_text, wait_until
from tests.backends.ray.test_ray_jobs import lifecycle_args

pytestmark = pytest.mark.ray_cluster


def test_a_replica_whose_node_goes_away_fails_the_job_naming_it(on_cluster):
    from ray.util.state import list_nodes

    job_id = "ray_node_loss"
    submitted = aiptrain(*lifecycle_args(job_id))
    assert submitted.returncode == 0, submitted.stderr
    # The primary starts last: once it is starting, every replica runs on its node.
    wait_until(lambda: "Starting master-replica-0" in log_text(on_cluster, job_id), "the replicas to start")
    second = next(node.node_id for node in list_nodes(address=on_cluster.address, detail=True)
                  if "node_second" in (node.resources_total or {}))
    nodes = actor_nodes(on_cluster, job_id, ["master-replica-0", "worker-replica-0"])
    lost = [task for task, node in nodes.items() if node == second]
    assert len(lost) == 1  # SPREAD put one replica on each node

    on_cluster.crash_node(1)  # its raylet, its workers and so the actors, all at once

    def ended() -> bool:
        state = backend(on_cluster).get_job(job_id).state
        return state is not None and state.is_terminal

    wait_until(ended, "the job to end", JOB_TIMEOUT)
    job = backend(on_cluster).get_job(job_id)
    assert job.state == "FAILED"
    assert job.error_message is not None and f"The replica {service_replica_name(lost[0])} " in job.error_message
    assert "Ray actor" in log_text(on_cluster, job_id)
