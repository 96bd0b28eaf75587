"""The replicas a job gets: its scale tier (or CUSTOM counts) expanded into replica groups.

Dry-run prints this, the local engine starts it and the Vertex translation turns it into worker
pools, so the expansion lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiptrain._job.catalog import Catalog
from aiptrain._job.spec import ROLES, ScaleTier, TrainingInput
from aiptrain._job.task_names import TASK_PREFIX, task_name


@dataclass(frozen=True)
class ReplicaGroup:
    role: str  # master | worker | parameter_server | evaluator
    task_type: str  # master | chief | worker | ps | evaluator (the TF_CONFIG name)
    count: int
    machine_type: str | None
    accelerator_type: str | None = None
    accelerator_count: int = 0
    image_uri: str | None = None
    env: tuple[tuple[str, str], ...] = ()  # the role's own environment variables (ReplicaConfig.env)

    def task_names(self) -> list[str]:
        return [task_name(self.role, index) for index in range(self.count)]


def primary_task_type(training_input: TrainingInput) -> str:
    """A custom container: `master`, or `chief` with useChiefInTfConfig. Otherwise the runtime
    decides (`chief` from 2.1, `master` up to 1.15) and useChiefInTfConfig has no effect: the
    service's API says the field "has no effect for training jobs that don't use a custom container"."""
    image = training_input.master_config.image_uri if training_input.master_config else None
    if image:
        return "chief" if training_input.use_chief_in_tf_config else "master"
    major = (training_input.runtime_version or "").split(".", 1)[0]
    return "chief" if major.isdigit() and int(major) >= 2 else "master"


def resolve_cluster(training_input: TrainingInput, catalog: Catalog) -> list[ReplicaGroup]:
    """Replica groups in role order (master, worker, parameter_server, evaluator); empty roles omitted."""
    tier = (training_input.scale_tier or ScaleTier.BASIC).value
    primary = primary_task_type(training_input)
    master_image = training_input.master_config.image_uri if training_input.master_config else None
    groups: list[ReplicaGroup] = []
    for spec_role in ROLES:
        role = spec_role.name
        config = spec_role.config(training_input)
        if tier == ScaleTier.CUSTOM:
            count, machine = spec_role.count(training_input), spec_role.machine_type(training_input)
            accel = config.accelerator_config if config else None
            accel_type = accel.type.value if accel and accel.type else None
            accel_count = int(accel.count or 0) if accel else 0
        else:
            spec = catalog.tiers[tier].roles.get(role)
            if spec is None:
                continue
            count, machine = spec.count, spec.type
            accel_type = spec.accelerator.type if spec.accelerator else None
            accel_count = spec.accelerator.count if spec.accelerator else 0
        if count <= 0:
            continue
        if accel_type is None and machine in catalog.machine_types:
            builtin = catalog.machine_types[machine].builtin_accelerator
            if builtin is not None:
                accel_type, accel_count = builtin.type, builtin.count
        image = (config.image_uri if config else None) or master_image
        groups.append(
            ReplicaGroup(
                role=role,
                task_type=primary if role == "master" else TASK_PREFIX[role],
                count=count,
                machine_type=machine,
                accelerator_type=accel_type,
                accelerator_count=accel_count,
                image_uri=image,
                env=tuple(sorted((config.env or {}).items())) if config else (),
            )
        )
    return groups
