"""What of a job this machine can run, and the cluster it actually starts.

`local_problems` is what the local backend refuses before anything is built or uploaded (this
machine's GPUs are asked for only when the job wants some); `plan_cluster` is the replica groups
the supervisor starts, after the optional replica cap, with the WARNING lines that tell the user
what differs from the service; `trials_at_once` is how many tuning trials (each a whole cluster)
run side by side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import ReplicaGroup, resolve_cluster
from aiptrain._job.spec import ROLE, Job, ScaleTier, TrainingInput
from aiptrain._job.task_names import TASK_PREFIX
from aiptrain._replicas.containers.images import container_problems, runs_containers
from aiptrain._replicas.containers.settings import ContainerSettings
from aiptrain._replicas.machine_share import Gpu, gpu_refusal, gpus_per_run, replica_asks
from aiptrain._replicas.settings import DEFAULT_MAX_REPLICAS, ReplicaSettings
from aiptrain._replicas.this_machine import find_gpus
from aiptrain.errors import Problem


@dataclass(frozen=True)
class LocalPlan:
    groups: list[ReplicaGroup]
    warnings: list[str]


def is_tpu(group: ReplicaGroup, catalog: Catalog) -> bool:
    machine = catalog.machine_types.get(group.machine_type or "")
    if machine is not None and machine.family == "tpu":
        return True
    kind = catalog.accelerators.get(group.accelerator_type or "", {}).get("kind")
    return kind == "tpu" or (group.machine_type or "").startswith("cloud_tpu")


def total_replicas(groups: list[ReplicaGroup]) -> int:
    return sum(group.count for group in groups)


def describe_groups(groups: list[ReplicaGroup]) -> str:
    return ", ".join(f"{TASK_PREFIX[group.role]} {group.count}" for group in groups)


def local_problems(
    job: Job, catalog: Catalog, settings: ReplicaSettings, gpus: Callable[[], Sequence[Gpu]] = find_gpus,
    container_settings: ContainerSettings | None = None,
) -> list[Problem]:
    """Everything about `job` the local backend cannot do; [] if it can run it. `gpus` lists
    this machine's GPUs (called only for a job that asks for some). A job whose master names an
    image runs as containers: it needs an engine and its images here (`containers.images`)."""
    training_input = job.training_input or TrainingInput()
    problems: list[Problem] = []
    containers = runs_containers(training_input)
    if containers:
        problems += container_problems(training_input, container_settings or ContainerSettings.from_env())
    elif not training_input.python_module:
        problems.append(Problem(
            "trainingInput.pythonModule", "the local backend needs a Python module to run",
            "pass --module-name, e.g. --module-name trainer.task",
        ))
    try:
        groups = resolve_cluster(training_input, catalog)
    except KeyError:
        return problems  # an unknown tier is the validator's to report
    tpu_groups = [group for group in groups if is_tpu(group, catalog)]
    if tpu_groups:
        tier = (training_input.scale_tier or ScaleTier.BASIC).value
        problems.append(Problem(
            "trainingInput.scaleTier" if tier == "BASIC_TPU" else "trainingInput",
            "Cloud TPUs cannot be emulated on the local backend",
            "use scaleTier BASIC (or CUSTOM without TPU workers) to run on this machine's CPU, "
            "or use --backend vertex",
        ))
    count = total_replicas(groups)
    if settings.replica_cap is None and count > DEFAULT_MAX_REPLICAS:
        problems.append(Problem(
            "trainingInput.scaleTier",
            f"the job needs {count} replicas ({describe_groups(groups)}); the local backend runs at "
            f"most {DEFAULT_MAX_REPLICAS} processes per job unless told to shrink it",
            "set AIPTRAIN_LOCAL_REPLICA_CAP=N to shrink the cluster to N replicas "
            "(at least 1 master, then workers and parameter servers), or use a smaller tier",
        ))
    if settings.replica_cap is not None:
        groups = shrink_to_cap(groups, settings.replica_cap)
    problem = gpu_problem(training_input, groups, catalog, gpus)
    return problems + ([problem] if problem is not None else [])


def gpu_problem(
    training_input: TrainingInput, groups: list[ReplicaGroup], catalog: Catalog, gpus: Callable[[], Sequence[Gpu]],
) -> Problem | None:
    """A job whose replicas ask for more GPUs than this machine has could never start here (a
    machine without GPUs runs GPU requests on its CPU instead)."""
    asks = replica_asks(groups, catalog)
    if not gpus_per_run(asks):
        return None
    found = tuple(gpus())
    refusal = gpu_refusal(asks, found)
    if refusal is None:
        return None
    asking = next(group for group in groups if gpus_per_run(replica_asks([group], catalog)))
    role = ROLE[asking.role]
    config = role.config(training_input)
    if (training_input.scale_tier or ScaleTier.BASIC) != ScaleTier.CUSTOM:
        field = "trainingInput.scaleTier"
    elif config is not None and config.accelerator_config is not None:
        field = f"trainingInput.{role.config_field}.acceleratorConfig.count"
    else:
        field = f"trainingInput.{role.type_field}"
    return Problem(
        field,
        f"{refusal} (`nvidia-smi -L`), so the job could never start on the local backend",
        f"ask for at most {len(found)} GPUs in all (fewer per replica, or fewer replicas with GPUs), "
        "or use --backend vertex",
    )


def shrink_to_cap(groups: list[ReplicaGroup], cap: int) -> list[ReplicaGroup]:
    """Keep the master, give every other role one replica while the cap allows, then share the
    rest in proportion to what each role asked for (largest remainder first)."""
    if total_replicas(groups) <= cap:
        return groups
    budget = cap - 1
    others = [group for group in groups if group.role != "master"]
    counts = {group.role: 0 for group in others}
    for group in others:
        if budget > 0:
            counts[group.role] = 1
            budget -= 1
    wanted = {group.role: group.count - counts[group.role] for group in others}
    asked = sum(wanted.values())
    if budget > 0 and asked > 0:
        shares = {role: budget * want / asked for role, want in wanted.items()}
        for role, share in shares.items():
            counts[role] += int(share)
        leftover = budget - sum(int(share) for share in shares.values())
        by_remainder = sorted(shares, key=lambda role: shares[role] - int(shares[role]), reverse=True)
        for role in by_remainder[:leftover]:
            counts[role] += 1
    shrunk = []
    for group in groups:
        count = 1 if group.role == "master" else counts[group.role]
        if count > 0:
            shrunk.append(dataclasses.replace(group, count=count))
    return shrunk


def plan_cluster(
    training_input: TrainingInput, catalog: Catalog, settings: ReplicaSettings,
    gpus: Callable[[], Sequence[Gpu]] = find_gpus,
) -> LocalPlan:
    """The replica groups to start here and the WARNING lines explaining local differences
    (`gpus`, asked only when the job wants some: this machine's; without any, GPU requests run
    on the CPU)."""
    groups = resolve_cluster(training_input, catalog)
    warnings: list[str] = []
    if settings.replica_cap is not None and total_replicas(groups) > settings.replica_cap:
        shrunk = shrink_to_cap(groups, settings.replica_cap)
        warnings.append(
            f"AIPTRAIN_LOCAL_REPLICA_CAP={settings.replica_cap} shrank the cluster from "
            f"{total_replicas(groups)} replicas ({describe_groups(groups)}) to "
            f"{total_replicas(shrunk)} ({describe_groups(shrunk)})."
        )
        groups = shrunk
    gpu_groups = [group for group in groups if gpus_per_run(replica_asks([group], catalog))]
    for group in gpu_groups if gpu_groups and not gpus() else []:
        warnings.append(
            f"The {TASK_PREFIX[group.role]} replicas asked for {group.accelerator_count} x "
            f"{group.accelerator_type}; this machine has no GPU (`nvidia-smi -L` lists none), so they "
            "run on its CPU."
        )
    return LocalPlan(groups, warnings)


def trials_at_once(
    max_parallel_trials: int, groups: list[ReplicaGroup], gpus_per_trial: int = 0, machine_gpus: int = 0,
) -> tuple[int, str | None]:
    """How many tuning trials run at once here, and a WARNING line if fewer than asked.

    Each trial is a whole cluster; trials side by side may hold at most DEFAULT_MAX_REPLICAS
    processes together (the same bound as one job's cluster), and, on a machine with GPUs, at
    most its GPUs, so maxParallelTrials is lowered when its clusters would exceed either. Every
    trial still runs, only fewer at a time.
    """
    per_trial = max(1, total_replicas(groups))
    fitting = max(1, DEFAULT_MAX_REPLICAS // per_trial)
    if gpus_per_trial and machine_gpus:
        by_gpus = max(1, machine_gpus // gpus_per_trial)
        if max_parallel_trials > by_gpus and by_gpus < fitting:
            return by_gpus, (
                f"maxParallelTrials is {max_parallel_trials}, but each trial's replicas take {gpus_per_trial} of "
                f"this machine's {machine_gpus} GPUs; running {by_gpus} trial(s) at a time."
            )
    if max_parallel_trials <= fitting:
        return max_parallel_trials, None
    return fitting, (
        f"maxParallelTrials is {max_parallel_trials}, but {max_parallel_trials} trials of {per_trial} "
        f"replica(s) each exceed the {DEFAULT_MAX_REPLICAS} processes this machine runs for one job; "
        f"running {fitting} trial(s) at a time."
    )


def trial_lanes(training_input: TrainingInput, groups: list[ReplicaGroup], catalog: Catalog, machine_gpus: int) -> int:
    """How many clusters of the job run at once: 1, or a tuning job's trials at a time (no more
    than it has trials), each with its own share of the machine."""
    tuning = training_input.hyperparameters
    if tuning is None:
        return 1
    parallel, _ = trials_at_once(tuning.max_parallel_trials or 1, groups,
                                 gpus_per_run(replica_asks(groups, catalog)), machine_gpus)
    return max(1, min(parallel, tuning.max_trials or 1))
