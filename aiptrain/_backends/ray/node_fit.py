"""Whether each replica's bundle can ever fit a node of the cluster, said at submit.

A placement group whose bundles fit the nodes but not the room they have now waits (the job stays
QUEUED until other jobs end or an autoscaler adds nodes). A bundle larger than every node would
wait for ever, so such a job is refused before anything reaches the cluster, with the numbers
and the `--ray-resource-scale` that would make it fit. Clusters whose autoscaler adds larger
nodes than the ones they have now (worker groups that start at zero) turn the check off
(AIPTRAIN_RAY_FIT_CHECK=off). Pure: the client reads the nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiptrain._backends.ray.plan import CONTAINER_RESOURCE, Bundle
from aiptrain._backends.ray.settings import FIT_CHECK_VARIABLE
from aiptrain.errors import UsageError

_GIB = 1024**3


@dataclass(frozen=True)
class NodeSize:
    """What one node of the cluster has in all (its Ray resources)."""

    label: str
    cpus: float
    memory_bytes: float
    gpus: float
    containers: float = 0.0  # its CONTAINER_RESOURCE: it offers a container engine

    def holds(self, bundle: Bundle) -> bool:
        return (bundle.cpus <= self.cpus and bundle.memory_bytes <= self.memory_bytes and bundle.gpus <= self.gpus
                and (not bundle.container or self.containers > 0))

    def describe(self) -> str:
        gpus = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"{self.label}: {self.cpus:g} CPU, {self.memory_bytes / _GIB:.1f} GiB{gpus}"


def container_refusal(bundles: list[Bundle], nodes: list[NodeSize]) -> UsageError | None:
    """The refusal of a container job on a cluster none of whose nodes offers a container engine,
    naming the nodes; else None (also when the cluster reported no nodes)."""
    if not nodes or not any(bundle.container for bundle in bundles) or any(node.containers for node in nodes):
        return None
    listed = "; ".join(node.label for node in nodes)
    return UsageError(
        f"the job's replicas run images, and no node of the Ray cluster offers a container engine (a node that "
        f"has one declares the resource {CONTAINER_RESOURCE}): {listed}",
        hint="install Docker or Podman on the nodes that should run containers and start them with "
             f"ray start --resources='{{\"{CONTAINER_RESOURCE}\": 1000}}', or run the job on the local backend")


def fit_refusal(bundles: list[Bundle], nodes: list[NodeSize], scale: float) -> UsageError | None:
    """The refusal of a job one of whose bundles no node can hold, else None (also when the
    cluster reported no nodes: nothing can be said then)."""
    if not nodes:
        return None
    homeless = [bundle for bundle in bundles if not any(node.holds(bundle) for node in nodes)]
    if not homeless:
        return None
    first = homeless[0]
    others = f" (and {len(homeless) - 1} more replica(s))" if len(homeless) > 1 else ""
    listed = "; ".join(node.describe() for node in sorted(nodes, key=lambda n: (-n.cpus, -n.memory_bytes)))
    message = (f"the replica {first.describe()} ({first.machine_type}) is larger than any node of the Ray "
               f"cluster{others}, so it could never be placed; the cluster's nodes: {listed}")
    off = f"; set {FIT_CHECK_VARIABLE}=off if the cluster's autoscaler adds larger nodes than it has now"
    if any(not any(node.gpus >= bundle.gpus for node in nodes) for bundle in homeless):
        return UsageError(message, hint="no node has that many GPUs, which --ray-resource-scale never reduces: ask "
                                        f"for fewer GPUs per replica (acceleratorConfig.count) or add GPU nodes{off}")
    fitting = _fitting_scale(bundles, nodes, scale)
    return UsageError(message, hint=f"pass --ray-resource-scale {fitting:g} to reserve that fraction of each machine "
                                    f"type's CPUs and memory (every replica then fits a node), or choose smaller "
                                    f"machine types{off}")


def _fitting_scale(bundles: list[Bundle], nodes: list[NodeSize], scale: float) -> float:
    """The largest scale (two decimals) at which every bundle fits some node."""
    factor = min(
        max(min(node.cpus / bundle.cpus, node.memory_bytes / max(bundle.memory_bytes, 1))
            for node in nodes if node.gpus >= bundle.gpus)
        for bundle in bundles
    )
    return max(0.01, math.floor(min(1.0, scale * factor) * 100) / 100)
