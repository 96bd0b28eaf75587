"""An ml v1 training Job as a Vertex AI CustomJob, and a CustomJob presented as an ml v1 Job.

A job with `hyperparameters` becomes a HyperparameterTuningJob whose trials run this CustomJob
(`vertex.study`); `job_to_custom_job` gives the trial job and leaves the tuning to that module.

Forward (`job_to_custom_job`): the replicas come from `resolve_cluster`, so scale tiers expand
exactly as they do locally. Worker pool positions carry the roles (0 master, 1 workers, 2
parameter servers, 3 evaluators); inner empty pools stay as `{}` and trailing ones are dropped.
Machine types, accelerators and executor images come from the catalog.

Fields Vertex cannot express are refused with a Problem (`vertex_problems`), never dropped:

- `hyperparameters.resumePreviousJobId`: a HyperparameterTuningJob cannot resume another.
- `scheduling.priority`: Vertex has no job priority.
- `scheduling.maxWaitTime`: Vertex's `maxWaitDuration` only applies to the FLEX_START
  provisioning strategy, so mapping it would silently change how machines are obtained.
- `pythonVersion` 2.x: Vertex's prebuilt executor images run Python 3 only. A 3.x version is
  accepted: the runtime's executor image is the Vertex counterpart of the runtime/Python pair.
- `useChiefInTfConfig: false` with a custom container: Vertex always names the primary replica
  `chief` in TF_CONFIG; a container that was told `master` would not find itself.
- `tpuTfVersion`: TPU software is chosen by the executor image on Vertex.
- an accelerator or runtime version the catalog has no Vertex name or image for.

Reverse (`custom_job_to_job`): what `describe` shows for a CustomJob, and what the emulator
runs. The job ID is the display name; Vertex's states are folded onto ml v1's (VERTEX_TO_ML_STATE).
"""

from __future__ import annotations

from typing import Any

from aiptrain._job.catalog import Catalog, Runtime, load_catalog, vertex_image_python
from aiptrain._job.cluster import ReplicaGroup, resolve_cluster
from aiptrain._job.prebuilt import prebuilt_image_of
from aiptrain._job.spec import ROLE, ROLES, AcceleratorType, Job, JobState, ReplicaConfig, TrainingInput
from aiptrain.errors import Problem, ProblemList, ValidationFailed

# Worker pool index -> ml v1 role; the order is Vertex's contract (and the service's role order).
POOL_ROLES = tuple(role.name for role in ROLES)

# Vertex JobState -> ml v1 Job state. API facts, not catalog data.
# PAUSED waits to be resumed, like a queued job; EXPIRED and PARTIALLY_SUCCEEDED did not run to
# completion, which for a training job (and its exit code) is a failure; UPDATING is a running job.
VERTEX_TO_ML_STATE: dict[str, JobState] = {
    "JOB_STATE_UNSPECIFIED": JobState.STATE_UNSPECIFIED,
    "JOB_STATE_QUEUED": JobState.QUEUED,
    "JOB_STATE_PENDING": JobState.PREPARING,
    "JOB_STATE_RUNNING": JobState.RUNNING,
    "JOB_STATE_SUCCEEDED": JobState.SUCCEEDED,
    "JOB_STATE_FAILED": JobState.FAILED,
    "JOB_STATE_CANCELLING": JobState.CANCELLING,
    "JOB_STATE_CANCELLED": JobState.CANCELLED,
    "JOB_STATE_PAUSED": JobState.QUEUED,
    "JOB_STATE_EXPIRED": JobState.FAILED,
    "JOB_STATE_UPDATING": JobState.RUNNING,
    "JOB_STATE_PARTIALLY_SUCCEEDED": JobState.FAILED,
}

# ml v1 state -> the Vertex state a CustomJob in that state reports (used by the emulator).
ML_TO_VERTEX_STATE: dict[JobState, str] = {
    JobState.STATE_UNSPECIFIED: "JOB_STATE_UNSPECIFIED",
    JobState.QUEUED: "JOB_STATE_QUEUED",
    JobState.PREPARING: "JOB_STATE_PENDING",
    JobState.RUNNING: "JOB_STATE_RUNNING",
    JobState.SUCCEEDED: "JOB_STATE_SUCCEEDED",
    JobState.FAILED: "JOB_STATE_FAILED",
    JobState.CANCELLING: "JOB_STATE_CANCELLING",
    JobState.CANCELLED: "JOB_STATE_CANCELLED",
}


def _custom_image(ti: TrainingInput) -> str | None:
    return ti.master_config.image_uri if ti.master_config else None


def vertex_problems(job: Job, catalog: Catalog) -> list[Problem]:
    """Every part of `job` the Vertex translation cannot express; [] when it translates fully."""
    refusals = ProblemList()
    ti = job.training_input or TrainingInput()
    _check_unmappable_fields(ti, refusals)
    groups = resolve_cluster(ti, catalog)
    for group in groups:
        _check_accelerator(ti, group, catalog, refusals)
    if _custom_image(ti) is None:
        _executor_images(ti, catalog, refusals)
    return refusals.problems


def _check_unmappable_fields(ti: TrainingInput, refusals: ProblemList) -> None:
    if ti.hyperparameters is not None and ti.hyperparameters.resume_previous_job_id:
        refusals.add("trainingInput.hyperparameters.resumePreviousJobId",
                     "Vertex AI hyperparameter tuning jobs cannot continue an earlier job's trials",
                     "remove resumePreviousJobId to start a new study, or resume on --backend local or mlv1")
    scheduling = ti.scheduling
    if scheduling is not None and scheduling.priority is not None:
        refusals.add("trainingInput.scheduling.priority", "Vertex AI custom jobs have no priority",
                     "remove scheduling.priority")
    if scheduling is not None and scheduling.max_wait_time is not None:
        refusals.add("trainingInput.scheduling.maxWaitTime",
                     "Vertex AI has no queueing deadline for standard jobs (its maxWaitDuration only "
                     "applies to the FLEX_START provisioning strategy)",
                     "remove scheduling.maxWaitTime; the job waits until its machines are available")
    if ti.python_version is not None and ti.python_version.split(".", 1)[0] == "2":
        refusals.add("trainingInput.pythonVersion",
                     f"Vertex AI executor images run Python 3, not Python {ti.python_version}",
                     "port the trainer to Python 3 and drop --python-version, or use a custom container")
    if ti.use_chief_in_tf_config is False and _custom_image(ti) is not None:
        refusals.add("trainingInput.useChiefInTfConfig",
                     "Vertex AI always names the primary replica `chief` in TF_CONFIG, never `master`",
                     "make the trainer accept `chief`, then set useChiefInTfConfig to true or remove it")
    for role in ROLES:
        config = role.config(ti)
        if config is not None and config.tpu_tf_version is not None:
            refusals.add(f"trainingInput.{role.config_field}.tpuTfVersion",
                         "Vertex AI chooses the TPU software from the container image",
                         "remove tpuTfVersion")


def _accelerator_path(ti: TrainingInput, group: ReplicaGroup) -> str:
    role = ROLE[group.role]
    config = role.config(ti)
    if config is not None and config.accelerator_config is not None:
        return f"trainingInput.{role.config_field}.acceleratorConfig.type"
    # The accelerator came from the scale tier or from a legacy machine type.
    if (ti.scale_tier or "BASIC") != "CUSTOM":
        return "trainingInput.scaleTier"
    return f"trainingInput.{role.type_field}"


def _check_accelerator(ti: TrainingInput, group: ReplicaGroup, catalog: Catalog,
                       refusals: ProblemList) -> None:
    if group.accelerator_type is None or group.accelerator_count <= 0:
        return
    if catalog.vertex_accelerator(group.accelerator_type) is None:
        refusals.add(_accelerator_path(ti, group),
                     f"{group.accelerator_type} has no Vertex AI equivalent",
                     "choose an accelerator Vertex AI offers, e.g. TPU_V3 instead of a TPU pod")


def _image_kind(group: ReplicaGroup, catalog: Catalog, images: dict[str, str]) -> str:
    """Which of the runtime's images a pool runs: its accelerator's kind (gpu, or tpu when the
    catalog names a TPU image) if the runtime has an image of that kind, else cpu."""
    if group.accelerator_type is None or group.accelerator_count <= 0:
        return "cpu"
    kind = str(catalog.accelerators.get(group.accelerator_type, {}).get("kind") or "cpu")
    return kind if kind in images else "cpu"


def _executor_images(ti: TrainingInput, catalog: Catalog, refusals: ProblemList) -> dict[str, str] | None:
    """The runtime's Vertex images ({cpu, gpu, ...}), or None with a refusal recorded."""
    version = catalog.runtime_version_for(ti.runtime_version)
    runtime = catalog.runtime_for(ti.runtime_version)
    supported = ", ".join(v for v, r in catalog.runtimes.items() if r.vertex_images)
    if runtime is None or not runtime.vertex_images:
        what = (f"runtime version {version}" if ti.runtime_version
                else f"a job without runtimeVersion (the service used {version})")
        refusals.add("trainingInput.runtimeVersion",
                     f"Vertex AI has no prebuilt training image for {what}",
                     f"use a runtime version Vertex AI supports ({supported}), or a custom container "
                     "(--master-image-uri)")
        return None
    # The images whose Python is the job's (its pythonVersion, else the runtime's default), when
    # Vertex AI has them; else the runtime's default images, and `python_change_warning` says so.
    return runtime.vertex_images_by_python.get(_job_python(ti, runtime), runtime.vertex_images)


def _job_python(ti: TrainingInput, runtime: Runtime) -> str:
    return ti.python_version or runtime.default_python


def python_change_warning(job: Job, catalog: Catalog) -> str | None:
    """What a job is told when Vertex AI has no pre-built image with its Python: the Python the
    images run instead. None when the Python stays (or a custom container brings its own)."""
    ti = job.training_input
    if ti is None or _custom_image(ti):
        return None
    runtime = catalog.runtime_for(ti.runtime_version)
    if runtime is None or not runtime.vertex_images:
        return None
    wanted = _job_python(ti, runtime)
    if wanted in runtime.vertex_images_by_python:
        return None
    running = vertex_image_python(next(iter(runtime.vertex_images.values())))
    others = ", ".join(sorted(runtime.vertex_images_by_python))
    return (f"on Vertex AI this job runs Python {running}, not {wanted}: runtime version {runtime.version} has "
            f"pre-built images for Python {others} only; check the trainer runs on Python {running}")


def job_to_custom_job(job: Job, catalog: Catalog) -> dict[str, Any]:
    """The CustomJob body for `job`; raises ValidationFailed listing what Vertex cannot express."""
    problems = vertex_problems(job, catalog)
    if problems:
        raise ValidationFailed(problems)
    ti = job.training_input or TrainingInput()
    groups = {group.role: group for group in resolve_cluster(ti, catalog)}
    images = None if _custom_image(ti) else _executor_images(ti, catalog, ProblemList())
    pools: list[dict[str, Any]] = []
    for role in POOL_ROLES:
        group = groups.get(role)
        pools.append({} if group is None else _worker_pool(ti, group, images, catalog))
    while pools and not pools[-1]:
        pools.pop()

    spec: dict[str, Any] = {"workerPoolSpecs": pools}
    if ti.job_dir:
        spec["baseOutputDirectory"] = {"outputUriPrefix": ti.job_dir}
    if ti.scheduling is not None and ti.scheduling.max_running_time is not None:
        spec["scheduling"] = {"timeout": ti.scheduling.max_running_time}
    if ti.service_account:
        spec["serviceAccount"] = ti.service_account
    if ti.network:
        spec["network"] = ti.network
    if ti.enable_web_access:
        spec["enableWebAccess"] = True

    body: dict[str, Any] = {"displayName": job.job_id or "", "jobSpec": spec}
    if job.labels:
        body["labels"] = dict(job.labels)
    if ti.encryption_config is not None and ti.encryption_config.kms_key_name:
        body["encryptionSpec"] = {"kmsKeyName": ti.encryption_config.kms_key_name}
    return body


def _vertex_machine_type(name: str | None, catalog: Catalog) -> str | None:
    machine = catalog.machine_types.get(name or "")
    if machine is None:
        return name
    return machine.vertex_machine_type or machine.compute_engine or machine.name


def _job_dir_args(args: list[str] | None, job_dir: str | None) -> list[str] | None:
    """The user's args with `--job-dir=DIR` appended, the way the service passed the job dir."""
    if not job_dir:
        return list(args) if args is not None else None
    return [*(args or []), f"--job-dir={job_dir}"]


def _worker_pool(ti: TrainingInput, group: ReplicaGroup, images: dict[str, str] | None,
                 catalog: Catalog) -> dict[str, Any]:
    machine: dict[str, Any] = {"machineType": _vertex_machine_type(group.machine_type, catalog)}
    if group.accelerator_type is not None and group.accelerator_count > 0:
        machine["acceleratorType"] = catalog.vertex_accelerator(group.accelerator_type)
        machine["acceleratorCount"] = group.accelerator_count
    pool: dict[str, Any] = {"machineSpec": machine, "replicaCount": str(group.count)}

    config = ROLE[group.role].config(ti)
    # A module on one of Google's pre-built images is a Python package on that executor image.
    executor = group.image_uri if group.image_uri and prebuilt_image_of(ti, catalog) is not None else None
    if group.image_uri and executor is None:
        pool["containerSpec"] = _container_spec(ti, group.image_uri, config)
    else:
        if executor is None:
            assert images is not None  # vertex_problems refused the job otherwise
            executor = images[_image_kind(group, catalog, images)]
        package: dict[str, Any] = {
            "executorImageUri": executor,
            "packageUris": list(ti.package_uris or []),
            "pythonModule": ti.python_module or "",
        }
        args = _job_dir_args(ti.args, ti.job_dir)
        if args:
            package["args"] = args
        pool["pythonPackageSpec"] = package
    if config is not None and config.env:
        spec_key = "containerSpec" if group.image_uri else "pythonPackageSpec"
        pool[spec_key]["env"] = [{"name": name, "value": value} for name, value in config.env.items()]

    disk = config.disk_config if config is not None else None
    if disk is not None and (disk.boot_disk_type or disk.boot_disk_size_gb):
        disk_spec: dict[str, Any] = {}
        if disk.boot_disk_type:
            disk_spec["bootDiskType"] = disk.boot_disk_type
        if disk.boot_disk_size_gb:
            disk_spec["bootDiskSizeGb"] = disk.boot_disk_size_gb
        pool["diskSpec"] = disk_spec
    return pool


def _container_spec(ti: TrainingInput, image: str, config: ReplicaConfig | None) -> dict[str, Any]:
    """containerSpec for a custom container.

    Per-replica containerCommand/containerArgs are passed verbatim (they are the whole command
    line); TrainingInput.args get the `--job-dir` argument appended, as for Python packages.
    """
    container: dict[str, Any] = {"imageUri": image}
    if config is not None and config.container_command:
        container["command"] = list(config.container_command)
    if config is not None and config.container_args is not None:
        args: list[str] | None = list(config.container_args)
    else:
        args = _job_dir_args(ti.args, ti.job_dir)
    if args:
        container["args"] = args
    return container


# -- reverse ----------------------------------------------------------------------------------


def location_of(resource_name: str) -> str | None:
    """`projects/P/locations/L/customJobs/N` -> `L`."""
    parts = resource_name.split("/")
    if len(parts) >= 4 and parts[0] == "projects" and parts[2] == "locations":
        return parts[3]
    return None


def custom_job_to_job(custom_job: dict[str, Any], catalog: Catalog | None = None) -> Job:
    """Present a CustomJob in the ml v1 Job shape (what describe/list show, what the emulator runs).

    The replicas become a CUSTOM tier; Vertex always uses `chief` in TF_CONFIG, so the job says
    `useChiefInTfConfig: true`. Accelerators without an ml v1 name are left out of the picture.
    """
    catalog = catalog or load_catalog()
    spec: dict[str, Any] = custom_job.get("jobSpec") or {}
    pools: list[dict[str, Any]] = spec.get("workerPoolSpecs") or []
    ti: dict[str, Any] = {"scaleTier": "CUSTOM"}
    job_dir = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    program_seen = False
    for position, pool in enumerate(pools[: len(POOL_ROLES)]):
        if not pool:
            continue
        role = POOL_ROLES[position]
        _role_into(ti, role, pool, catalog)
        if not program_seen:
            program_seen = True
            _program_into(ti, pool, job_dir, catalog)

    if job_dir:
        ti["jobDir"] = job_dir
    region = location_of(str(custom_job.get("name") or ""))
    if region:
        ti["region"] = region
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout:
        ti["scheduling"] = {"maxRunningTime": timeout}
    for key in ("serviceAccount", "network"):
        if spec.get(key):
            ti[key] = spec[key]
    if spec.get("enableWebAccess"):
        ti["enableWebAccess"] = True
    kms = (custom_job.get("encryptionSpec") or {}).get("kmsKeyName")
    if kms:
        ti["encryptionConfig"] = {"kmsKeyName": kms}
    ti["useChiefInTfConfig"] = True

    data: dict[str, Any] = {"jobId": custom_job.get("displayName") or "", "trainingInput": ti}
    if custom_job.get("labels"):
        data["labels"] = dict(custom_job["labels"])
    state = custom_job.get("state")
    if state:
        data["state"] = VERTEX_TO_ML_STATE.get(str(state), JobState.STATE_UNSPECIFIED).value
    for key in ("createTime", "startTime", "endTime"):
        if custom_job.get(key):
            data[key] = custom_job[key]
    message = (custom_job.get("error") or {}).get("message")
    if message:
        data["errorMessage"] = message
    if custom_job.get("webAccessUris"):
        data["trainingOutput"] = {"webAccessUris": dict(custom_job["webAccessUris"])}
    return Job.model_validate(data)


def _ml_machine_type(vertex_name: str | None, catalog: Catalog) -> str | None:
    for machine in catalog.machine_types.values():
        if machine.vertex_machine_type and machine.vertex_machine_type == vertex_name:
            return machine.name
    return vertex_name


def _ml_accelerator(vertex_name: str | None, catalog: Catalog) -> str | None:
    for name, spec in catalog.accelerators.items():
        if spec.get("vertex") == vertex_name and name in AcceleratorType.__members__:
            return name
    return None


def _pool_env(pool: dict[str, Any]) -> dict[str, str]:
    """A worker pool's `env` (a list of {name, value}, in its package or container spec) as a mapping."""
    spec = pool.get("pythonPackageSpec") or pool.get("containerSpec") or {}
    return {str(item.get("name")): str(item.get("value") or "") for item in spec.get("env") or [] if item.get("name")}


def _role_into(ti: dict[str, Any], role_name: str, pool: dict[str, Any], catalog: Catalog) -> None:
    role = ROLE[role_name]
    machine = pool.get("machineSpec") or {}
    ti[role.type_field] = _ml_machine_type(machine.get("machineType"), catalog)
    if role.count_field is not None:
        ti[role.count_field] = str(pool.get("replicaCount") or "1")
    config: dict[str, Any] = {}
    accelerator = _ml_accelerator(machine.get("acceleratorType"), catalog)
    if accelerator and machine.get("acceleratorCount"):
        config["acceleratorConfig"] = {"type": accelerator, "count": str(machine["acceleratorCount"])}
    container = pool.get("containerSpec") or {}
    if container.get("imageUri"):
        config["imageUri"] = container["imageUri"]
        if container.get("command"):
            config["containerCommand"] = list(container["command"])
        if container.get("args"):
            config["containerArgs"] = list(container["args"])
    env = _pool_env(pool)
    if env:
        config["env"] = env
    disk = pool.get("diskSpec") or {}
    disk_config = {k: disk[k] for k in ("bootDiskType", "bootDiskSizeGb") if disk.get(k)}
    if disk_config:
        config["diskConfig"] = disk_config
    if config:
        ti[role.config_field] = config


def _program_into(ti: dict[str, Any], pool: dict[str, Any], job_dir: str | None, catalog: Catalog) -> None:
    """Package, module, args and runtime version from the first pool (every pool runs the same)."""
    package = pool.get("pythonPackageSpec")
    if not package:
        return
    ti["packageUris"] = list(package.get("packageUris") or [])
    if package.get("pythonModule"):
        ti["pythonModule"] = package["pythonModule"]
    args = list(package.get("args") or [])
    # The forward translation appends the job dir as an argument; the job dir field carries it.
    if job_dir and args and args[-1] == f"--job-dir={job_dir}":
        args.pop()
    if args:
        ti["args"] = args
    image = str(package.get("executorImageUri") or "")
    prebuilt = catalog.prebuilt_image(image)
    if prebuilt is not None and prebuilt.runtime:  # a TensorFlow executor image is its runtime version
        ti["runtimeVersion"] = prebuilt.runtime
    elif image:  # PyTorch, scikit-learn, XGBoost: the image runs the module (`job.prebuilt`)
        ti.setdefault("masterConfig", {})["imageUri"] = image
