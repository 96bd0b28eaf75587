"""What a replica is called, from its role and index: the one table of role -> name.

ml v1 calls a replica `<prefix>-replica-<index>` (`master-replica-0`, `worker-replica-1`,
`ps-replica-0`, `evaluator-replica-0`), which is also how its log entries, the console and
TF_CONFIG's task type (but the master's, `master` or `chief`) name it. Vertex AI numbers its
worker pools in the order of `spec.ROLES`, which is this table's order (`workerpool0` the master's ... `workerpool3` the
evaluators') and names a replica's log `workerpool<N>-<index>`.
"""

from __future__ import annotations

# Role -> the prefix of its replicas' ml v1 task names (and their TF_CONFIG type, but the master's),
# in the roles' order (spec.ROLES, the Vertex pools' numbering). No pydantic here: the light paths
# (`jobs wait`, the reaper) name replicas without loading the job model.
TASK_PREFIX = {"master": "master", "worker": "worker", "parameter_server": "ps", "evaluator": "evaluator"}

_REPLICA = "-replica-"
_POOL = "workerpool"
_POOL_ROLES = tuple(TASK_PREFIX)


def task_name(role: str, index: int) -> str:
    """`worker`, 1 -> `worker-replica-1`."""
    return f"{TASK_PREFIX[role]}{_REPLICA}{index}"


def replica_of(name: str) -> tuple[str, int] | None:
    """`worker-replica-1` -> (`worker`, 1): a replica's task-name prefix and index; None for a
    name that is not a replica's (`service`, a Vertex pool name)."""
    prefix, separator, index = name.rpartition(_REPLICA)
    if separator and prefix in TASK_PREFIX.values() and index.isdigit():
        return prefix, int(index)
    return None


def vertex_pool(role: str) -> str:
    """`worker` -> `workerpool1`: the Vertex AI worker pool that runs the role."""
    return f"{_POOL}{_POOL_ROLES.index(role)}"


def vertex_task_name(ml_task_name: str) -> str:
    """`master-replica-0` -> `workerpool0-0` (names Vertex logs carry); others unchanged."""
    prefix, sep, index = ml_task_name.rpartition(_REPLICA)
    for role in _POOL_ROLES:
        if sep and TASK_PREFIX[role] == prefix and index.isdigit():
            return f"{vertex_pool(role)}-{index}"
    return ml_task_name


def ml_task_name(vertex_task: str) -> str:
    """`workerpool1-2` -> `worker-replica-2`; names that are not Vertex pool names unchanged."""
    head, sep, index = vertex_task.partition("-")
    pool = head.removeprefix(_POOL)
    if sep and head.startswith(_POOL) and pool.isdigit() and index.isdigit():
        position = int(pool)
        if position < len(_POOL_ROLES):
            return f"{TASK_PREFIX[_POOL_ROLES[position]]}{_REPLICA}{index}"
    return vertex_task
