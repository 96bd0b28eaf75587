"""Reads TF_CONFIG as AI Platform Training and Vertex AI write it, and decides this replica's role.

The service names the primary replica ``master``; TensorFlow only knows ``chief``. The service
also adds keys TensorFlow has no use for (``job``, ``environment``, ``task.trial``). This module
normalises all of that into a ``ClusterRole`` and rewrites TF_CONFIG to the minimal form TF's
cluster resolvers expect. It imports nothing from TensorFlow so it can be tested and used
before the (slow) TensorFlow import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

TF_CONFIG_ENV = "TF_CONFIG"

CHIEF = "chief"
WORKER = "worker"
PS = "ps"
EVALUATOR = "evaluator"
_SERVICE_PRIMARY = "master"

# How this replica takes part in training, decided by the cluster shape alone.
SINGLE = "single"
MULTI_WORKER = "multi_worker"
PARAMETER_SERVER = "parameter_server"
EVALUATION = "evaluation"


class ClusterConfigError(ValueError):
    """TF_CONFIG describes a cluster this trainer cannot run."""


@dataclass(frozen=True)
class ClusterRole:
    """What this process is in the job: its task, the cluster it belongs to and the training mode."""

    mode: str
    task_type: str = CHIEF
    task_index: int = 0
    cluster: Mapping[str, list[str]] = field(default_factory=dict)
    trial: str | None = None
    rpc_layer: str | None = None

    @property
    def label(self) -> str:
        return f"{self.task_type}:{self.task_index}"

    @property
    def is_primary(self) -> bool:
        """The replica that owns checkpoints, summaries, evaluation reports and the export."""
        if self.mode == EVALUATION:
            return False
        if self.task_type == CHIEF:
            return True
        # Without a chief, TensorFlow treats worker 0 as the chief.
        return self.task_type == WORKER and self.task_index == 0 and CHIEF not in self.cluster

    @property
    def num_workers(self) -> int:
        """Replicas that read training data: every worker, plus the chief unless it only coordinates."""
        workers = len(self.cluster.get(WORKER, []))
        if self.mode == PARAMETER_SERVER:
            return workers
        if self.mode == MULTI_WORKER:
            return workers + len(self.cluster.get(CHIEF, []))
        return 1

    def tf_config_for_tensorflow(self) -> str | None:
        """The TF_CONFIG TensorFlow should see, or None when TensorFlow should see no cluster."""
        if self.mode not in (MULTI_WORKER, PARAMETER_SERVER):
            return None
        config: dict[str, Any] = {
            "cluster": {name: list(addresses) for name, addresses in self.cluster.items()},
            "task": {"type": self.task_type, "index": self.task_index},
        }
        if self.rpc_layer:
            config["rpc_layer"] = self.rpc_layer
        return json.dumps(config, sort_keys=True)


def _normalise_task_type(task_type: str) -> str:
    return CHIEF if task_type == _SERVICE_PRIMARY else task_type


def _normalise_cluster(raw_cluster: Mapping[str, Any]) -> dict[str, list[str]]:
    cluster: dict[str, list[str]] = {}
    for name, addresses in raw_cluster.items():
        task_type = _normalise_task_type(str(name))
        if task_type == EVALUATOR:
            # Evaluators never join the training cluster, even when a launcher lists them.
            continue
        if not isinstance(addresses, list) or not addresses:
            continue
        if task_type in cluster:
            raise ClusterConfigError(f"TF_CONFIG cluster names the primary twice ({name!r} and 'chief')")
        cluster[task_type] = [str(address) for address in addresses]
    return cluster


def _decide_mode(task_type: str, cluster: Mapping[str, list[str]]) -> str:
    if task_type == EVALUATOR:
        return EVALUATION
    if not cluster:
        return SINGLE
    if PS in cluster:
        if not cluster.get(WORKER):
            raise ClusterConfigError("TF_CONFIG has parameter servers but no workers")
        if CHIEF not in cluster:
            raise ClusterConfigError("parameter server training needs a chief (or master) to coordinate")
        return PARAMETER_SERVER
    replicas = len(cluster.get(CHIEF, [])) + len(cluster.get(WORKER, []))
    return MULTI_WORKER if replicas > 1 else SINGLE


def parse_tf_config(text: str | None) -> ClusterRole:
    """Turn a TF_CONFIG value (possibly empty) into this replica's role."""
    if not text or not text.strip():
        return ClusterRole(mode=SINGLE)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ClusterConfigError(f"TF_CONFIG is not valid JSON: {error}") from error
    if not isinstance(config, dict):
        raise ClusterConfigError("TF_CONFIG must be a JSON object")

    cluster = _normalise_cluster(config.get("cluster") or {})
    task = config.get("task") or {}
    task_type = _normalise_task_type(str(task.get("type") or (CHIEF if not cluster else "")))
    if not task_type:
        raise ClusterConfigError("TF_CONFIG has a cluster but no task.type")
    task_index = int(task.get("index") or 0)
    trial = task.get("trial")

    mode = _decide_mode(task_type, cluster)
    if mode in (MULTI_WORKER, PARAMETER_SERVER):
        addresses = cluster.get(task_type)
        if addresses is None or task_index >= len(addresses):
            raise ClusterConfigError(f"task {task_type}:{task_index} is not in the TF_CONFIG cluster")
    if mode == SINGLE:
        # A one-replica "cluster" is plain local training: TensorFlow must not try to serve it.
        task_type, task_index = CHIEF, 0
    return ClusterRole(
        mode=mode,
        task_type=task_type,
        task_index=task_index,
        cluster=cluster,
        trial=str(trial) if trial not in (None, "") else None,
        rpc_layer=config.get("rpc_layer"),
    )


def role_from_environment(environ: Mapping[str, str] | None = None) -> ClusterRole:
    env = os.environ if environ is None else environ
    return parse_tf_config(env.get(TF_CONFIG_ENV))


def expose_to_tensorflow(role: ClusterRole, environ: MutableMapping[str, str] | None = None) -> None:
    """Rewrite TF_CONFIG so TensorFlow's resolvers see only what they understand."""
    env = os.environ if environ is None else environ
    tf_config = role.tf_config_for_tensorflow()
    if tf_config is None:
        env.pop(TF_CONFIG_ENV, None)
    else:
        env[TF_CONFIG_ENV] = tf_config
    if role.mode == PARAMETER_SERVER:
        # Lets the coordinator notice a lost worker or parameter server instead of retrying forever.
        env.setdefault("GRPC_FAIL_FAST", "use_caller")
