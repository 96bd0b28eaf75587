"""What each replica is told about its cluster: TF_CONFIG, CLUSTER_SPEC and the AIP_* variables
(and, on Google's pre-built PyTorch images, torch.distributed's WORLD_SIZE, RANK, MASTER_ADDR/PORT).

Pure functions, so dry-run can print exactly what a local run would set. The contract (DESIGN.md):

    TF_CONFIG = {"cluster": {PRIMARY: [addr], "worker": [...], "ps": [...]},
                 "task": {"type": T, "index": i[, "trial": "N"]},
                 "job": <the TrainingInput as its REST dict>,
                 "environment": "cloud"}

PRIMARY is `master` or `chief` (`cluster.primary_task_type`). Evaluators are never in
`cluster` but get `task.type == "evaluator"`. `task.trial` is present only for hyperparameter
tuning trials; an ordinary job has no `trial` key at all (trainers test `"trial" in task`).
Empty roles are left out of `cluster`, as the service does.

CLUSTER_SPEC is Vertex AI's form of the same facts: worker pools 0-3 are primary, workers,
parameter servers and evaluators (evaluators included, since Vertex lists every pool).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiptrain._job.cluster import ReplicaGroup
from aiptrain._job.spec import Job, TrainingInput
from aiptrain._job.task_names import vertex_pool

# Dry-run has no ports yet; every address shows this instead.
PLACEHOLDER_ADDRESS = "localhost:<port>"


@dataclass(frozen=True)
class ReplicaTask:
    """One process of the cluster."""

    role: str  # master | worker | parameter_server | evaluator
    task_type: str  # the TF_CONFIG type: master | chief | worker | ps | evaluator
    index: int
    task_name: str  # master-replica-0, worker-replica-1, ps-replica-0, evaluator-replica-0

    @property
    def is_primary(self) -> bool:
        return self.role == "master"


def replica_tasks(groups: list[ReplicaGroup]) -> list[ReplicaTask]:
    """Every replica of the groups, in group order."""
    return [
        ReplicaTask(group.role, group.task_type, index, name)
        for group in groups
        for index, name in enumerate(group.task_names())
    ]


def placeholder_addresses(groups: list[ReplicaGroup]) -> dict[str, list[str]]:
    return {group.task_type: [PLACEHOLDER_ADDRESS] * group.count for group in groups}


def _addresses_of(
    groups: list[ReplicaGroup], addresses: dict[str, list[str]] | None, group: ReplicaGroup
) -> list[str]:
    table = addresses if addresses is not None else placeholder_addresses(groups)
    found = table.get(group.task_type)
    if found is None or len(found) != group.count:
        raise ValueError(f"need {group.count} address(es) for {group.task_type!r}, got {found!r}")
    return list(found)


def training_input_dict(training_input: TrainingInput | None) -> dict[str, Any]:
    return training_input.to_api() if training_input is not None else {}


def tf_configs_for(
    job: Job,
    groups: list[ReplicaGroup],
    addresses: dict[str, list[str]] | None = None,
    trial: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Task name -> TF_CONFIG dict for every replica.

    `addresses` maps a TF_CONFIG task type (`master`/`chief`, `worker`, `ps`; `evaluator` is
    allowed and ignored) to one `host:port` per replica; None gives placeholders for dry-run.
    """
    cluster = {
        group.task_type: _addresses_of(groups, addresses, group)
        for group in groups
        if group.role != "evaluator"
    }
    job_dict = training_input_dict(job.training_input)
    configs: dict[str, dict[str, Any]] = {}
    for task in replica_tasks(groups):
        task_info: dict[str, Any] = {"type": task.task_type, "index": task.index}
        if trial is not None:
            task_info["trial"] = trial
        configs[task.task_name] = {
            "cluster": cluster,
            "task": task_info,
            "job": job_dict,
            "environment": "cloud",
        }
    return configs


def cluster_specs_for(
    groups: list[ReplicaGroup], addresses: dict[str, list[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """Task name -> Vertex-style CLUSTER_SPEC dict (evaluators need addresses here too)."""
    pools = {vertex_pool(group.role): _addresses_of(groups, addresses, group) for group in groups}
    return {
        task.task_name: {
            "cluster": pools,
            "environment": "cloud",
            "task": {"type": vertex_pool(task.role), "index": task.index},
        }
        for task in replica_tasks(groups)
    }


def replica_environment(
    *,
    job_id: str,
    tf_config: dict[str, Any],
    cluster_spec: dict[str, Any],
    job_dir: str | None,
    trial: str | None = None,
) -> dict[str, str]:
    """The variables a replica gets on top of the supervisor's environment.

    `job_dir` is the directory the trainer really writes to (already mapped from gs://);
    without one there is no AIP_MODEL_DIR/AIP_CHECKPOINT_DIR/AIP_TENSORBOARD_LOG_DIR, as on
    Vertex without a base output directory.
    """
    env = {
        "TF_CONFIG": json.dumps(tf_config),
        "CLUSTER_SPEC": json.dumps(cluster_spec),
        "CLOUD_ML_JOB_ID": job_id,
        "PYTHONUNBUFFERED": "1",
    }
    if job_dir:
        base = job_dir.rstrip("/")
        env["AIP_MODEL_DIR"] = f"{base}/model/"
        env["AIP_CHECKPOINT_DIR"] = f"{base}/checkpoints/"
        env["AIP_TENSORBOARD_LOG_DIR"] = f"{base}/logs/"
    if trial is not None:
        env["CLOUD_ML_TRIAL_ID"] = trial
    return env


def pytorch_variables(groups: list[ReplicaGroup], addresses: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """Task name -> what the service set on the replicas of its pre-built PyTorch images, for
    torch.distributed's env:// rendezvous: WORLD_SIZE (the primary and the workers), RANK (the
    primary 0, then the workers in order), MASTER_ADDR and MASTER_PORT (the primary's address).
    Other replica types get none."""
    ranked = [task for task in replica_tasks(groups) if task.role in ("master", "worker")]
    primary = next((group for group in groups if group.role == "master"), None)
    if primary is None or not ranked:
        return {}
    host, _, port = _addresses_of(groups, addresses, primary)[0].rpartition(":")
    return {task.task_name: {"WORLD_SIZE": str(len(ranked)), "RANK": str(rank), "MASTER_ADDR": host,
                             "MASTER_PORT": port}
            for rank, task in enumerate(ranked)}
