"""Task names: one table of role -> name, read the same way by ml v1, TF_CONFIG and Vertex AI."""

from __future__ import annotations

import pytest

from aiptrain._job.spec import ROLES
from aiptrain._job.task_names import (
    TASK_PREFIX,
    ml_task_name,
    replica_of,
    task_name,
    vertex_pool,
    vertex_task_name,
)


def test_every_role_has_a_prefix_in_the_roles_order() -> None:
    # The table's order numbers the Vertex pools, so it must be the service's order of roles.
    assert list(TASK_PREFIX) == [role.name for role in ROLES]


@pytest.mark.parametrize(("role", "index", "name", "pool"), [
    ("master", 0, "master-replica-0", "workerpool0"),
    ("worker", 3, "worker-replica-3", "workerpool1"),
    ("parameter_server", 1, "ps-replica-1", "workerpool2"),
    ("evaluator", 0, "evaluator-replica-0", "workerpool3"),
])
def test_a_role_names_its_replicas_and_its_vertex_pool(role: str, index: int, name: str, pool: str) -> None:
    assert task_name(role, index) == name
    assert vertex_pool(role) == pool


@pytest.mark.parametrize(("ml", "vertex"), [
    ("master-replica-0", "workerpool0-0"), ("worker-replica-3", "workerpool1-3"),
    ("ps-replica-1", "workerpool2-1"), ("evaluator-replica-0", "workerpool3-0"), ("service", "service"),
    ("worker-replica-12", "workerpool1-12"),
])
def test_task_names_translate_both_ways(ml: str, vertex: str) -> None:
    assert vertex_task_name(ml) == vertex
    assert ml_task_name(vertex) == ml


@pytest.mark.parametrize("name", ["parameter_server-replica-0", "chief-replica-0", "worker-replica-x",
                                  "worker-replica-", "replica-0"])
def test_names_that_are_no_replica_of_a_role_stay_as_they_are(name: str) -> None:
    assert vertex_task_name(name) == name


@pytest.mark.parametrize("name", ["workerpool4-0", "workerpool-0", "workerpool1-x", "workerpool1", "pool1-0"])
def test_names_that_are_no_vertex_pool_stay_as_they_are(name: str) -> None:
    assert ml_task_name(name) == name


def test_a_replica_s_prefix_and_index_are_read_back_from_its_name() -> None:
    for role in TASK_PREFIX:
        assert replica_of(task_name(role, 12)) == (TASK_PREFIX[role], 12)
    # Not a replica's: the service's own lines, Vertex pool names, a prefix no role has, no index.
    for name in ("service", "workerpool1-0", "chief-replica-0", "worker-replica-", "worker-replica-x"):
        assert replica_of(name) is None, name
