"""The cluster a job's tiers become on this machine: AIPTRAIN_LOCAL_REPLICA_CAP shrinks big tiers and says so.

What a capped job then runs is in tests/backends/local/test_cluster_jobs.py."""

from __future__ import annotations

from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import TrainingInput
from aiptrain._replicas.cluster_plan import plan_cluster, shrink_to_cap, total_replicas
from aiptrain._replicas.settings import ReplicaSettings


def test_replica_cap_shrinks_big_tiers_and_says_so() -> None:
    catalog = load_catalog()
    premium = TrainingInput.model_validate({"scaleTier": "PREMIUM_1"})
    groups = resolve_cluster(premium, catalog)
    assert total_replicas(groups) == 31
    shrunk = shrink_to_cap(groups, 6)
    assert {g.role: g.count for g in shrunk} == {"master": 1, "worker": 3, "parameter_server": 2}
    assert {g.role: g.count for g in shrink_to_cap(groups, 2)} == {"master": 1, "worker": 1}
    plan = plan_cluster(premium, catalog, ReplicaSettings(max_running=1, replica_cap=6))
    assert total_replicas(plan.groups) == 6
    assert plan.warnings == [
        "AIPTRAIN_LOCAL_REPLICA_CAP=6 shrank the cluster from 31 replicas (master 1, worker 19, ps 11) "
        "to 6 (master 1, worker 3, ps 2)."
    ]
    unchanged = plan_cluster(premium, catalog, ReplicaSettings(max_running=1, replica_cap=100))
    assert total_replicas(unchanged.groups) == 31 and unchanged.warnings == []
    gpu = plan_cluster(TrainingInput.model_validate({"scaleTier": "BASIC_GPU"}), catalog,
                       ReplicaSettings(max_running=1), gpus=tuple)  # a machine without GPUs
    assert len(gpu.warnings) == 1 and "NVIDIA_TESLA_K80" in gpu.warnings[0]
