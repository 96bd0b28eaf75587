"""A job's replica groups as containers: each replica's command and its share of the machine."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import ReplicaGroup
from aiptrain._job.spec import TrainingInput
from aiptrain._replicas.containers.command import REPLICA_PORT, container_command, machine_limits
from aiptrain._replicas.containers.launcher import ReplicaContainer
from aiptrain._replicas.machine_share import ReplicaShare


def host_memory_bytes() -> int | None:
    """This machine's memory (MemTotal), the ceiling of every replica's limit."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def replica_containers(
    training_input: TrainingInput, groups: Sequence[ReplicaGroup], catalog: Catalog, *,
    args: Sequence[str], job_dir: str | None, job_dir_argument: bool, extra_args: Sequence[str] = (),
    shares: Mapping[str, ReplicaShare] | None = None,
) -> list[ReplicaContainer]:
    """Every replica of `groups` as the container it runs: the command by the service's rules, the
    limits from its share (its cores and GPUs) or else its machine type, within this machine."""
    cores, memory = host_cores(), host_memory_bytes()
    containers = []
    for group in groups:
        command = container_command(training_input, group, args=args, job_dir=job_dir,
                                    job_dir_argument=job_dir_argument, extra_args=extra_args)
        for task_name in group.task_names():
            share = (shares or {}).get(task_name)
            limits = machine_limits(group, catalog, cores=cores, memory_bytes=memory,
                                    threads=share.threads if share else None,
                                    pinned=share.cores if share else (), gpus=share.gpus if share else ())
            containers.append(ReplicaContainer(task_name, command, limits))
    return containers


def container_lines(training_input: TrainingInput, groups: Sequence[ReplicaGroup], catalog: Catalog) -> list[str]:
    """Each replica's container as a dry run shows it: `task: IMAGE ARGS [limits]` (its machine
    type's: the GPUs it gets are known once the job holds its share)."""
    lines = []
    for replica in replica_containers(training_input, groups, catalog, args=training_input.args or [],
                                      job_dir=training_input.job_dir, job_dir_argument=True):
        options = " ".join(replica.limits.engine_options("docker"))
        lines.append(f"{replica.task_name}: {replica.command.describe()}" + (f" [{options}]" if options else ""))
    return lines


def container_addresses(groups: Sequence[ReplicaGroup]) -> dict[str, list[str]]:
    """Where each replica listens on Docker (its own hostname, one port), as TF_CONFIG names it."""
    return {group.task_type: [f"{name}:{REPLICA_PORT}" for name in group.task_names()] for group in groups}
