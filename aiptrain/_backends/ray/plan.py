"""What a job becomes on Ray, computed without Ray: refusals, bundles and the Ray job document.

One aiptrain job is one Ray job (submission ID = job ID, labels in its metadata) whose entrypoint
is `python -m aiptrain._backends.ray.driver`. The driver reads `aiptrain-job.json` (the payload
below) from its working directory, reserves one placement-group bundle per replica and runs the
replicas there. Bundles are sized from the machine-type catalog: a machine type's vCPUs and
memory, and the GPUs its accelerator config asks for; `--ray-resource-scale` shrinks CPUs and
memory (never GPUs) by a factor, and the job's log says so. Each replica runs in its runtime
version's own environment, which its actor builds (or finds) on its node with the local backend's
builder from the runtime's catalog entry (`runtime_spec`), so the driver keeps the cluster's base
environment; with AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster the replicas use the cluster's Python as
it is. A job's region (gcloud's command lines always give one) is accepted and has no effect; the
log says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from aiptrain._backends.ray.runtime_spec import runtime_spec
from aiptrain._backends.ray.settings import CACHE_VARIABLE, DEFAULT_NODE_CACHE
from aiptrain._environments.interpreters import Interpreter
from aiptrain._environments.resolution import RuntimeResolution, package_label, resolve_runtime
from aiptrain._job.catalog import Catalog
from aiptrain._job.cluster import ReplicaGroup, resolve_cluster
from aiptrain._job.prebuilt import prebuilt_image_of
from aiptrain._job.spec import Job, TrainingInput
from aiptrain._job.tf_config import replica_tasks
from aiptrain._replicas.cluster_plan import is_tpu
from aiptrain._replicas.containers.images import runs_containers
from aiptrain._replicas.containers.settings import ContainerSettings
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain.errors import Problem

ENTRYPOINT = "python -m aiptrain._backends.ray.driver"
PAYLOAD_FILE = "aiptrain-job.json"
# Where the staged packages sit inside the working directory, laid out as BUCKET/OBJECT.
PACKAGE_STORE_DIR = "packages"
PLACEMENT_STRATEGY = "SPREAD"
METADATA_PROJECT = "aiptrain.project"
METADATA_JOB = "aiptrain.job"
# Seconds `ray job stop` waits for the driver beyond the replicas' kill grace.
STOP_MARGIN_SECONDS = 15
_GIB = 1024**3
# The custom resource a node that can run containers offers (`ray start --resources
# '{"aiptrain_container_engine": 1000}'`): each container replica's bundle takes a sliver of it, so
# its replica lands on such a node.
CONTAINER_RESOURCE = "aiptrain_container_engine"
CONTAINER_RESOURCE_PER_REPLICA = 0.001


@dataclass(frozen=True)
class Bundle:
    """The resources one replica reserves on one node."""

    task_name: str
    machine_type: str | None
    cpus: float
    memory_bytes: int
    gpus: int
    container: bool = False  # the replica runs an image: only a node offering an engine takes it

    def resources(self) -> dict[str, float]:
        """The placement-group bundle as Ray takes it."""
        resources: dict[str, float] = {"CPU": self.cpus, "memory": float(self.memory_bytes)}
        if self.gpus:
            resources["GPU"] = float(self.gpus)
        if self.container:
            resources[CONTAINER_RESOURCE] = CONTAINER_RESOURCE_PER_REPLICA
        return resources

    def describe(self) -> str:
        gpus = f", {self.gpus} GPU" if self.gpus else ""
        return f"{self.task_name}: {self.cpus:g} CPU, {self.memory_bytes / _GIB:.2f} GiB{gpus}"


def ray_problems(job: Job, catalog: Catalog) -> list[Problem]:
    """Everything about `job` a Ray cluster cannot honour; [] if it can run it."""
    from aiptrain._replicas.gs_paths import unmappable_args

    training_input = job.training_input or TrainingInput()
    problems: list[Problem] = []
    if not training_input.python_module and not runs_containers(training_input):
        problems.append(Problem("trainingInput.pythonModule", "the ray backend needs a Python module to run",
                                "pass --module-name, e.g. --module-name trainer.task"))
    prebuilt = prebuilt_image_of(training_input, catalog)
    if prebuilt is not None and not prebuilt.runtime:
        problems.append(Problem("trainingInput.masterConfig.imageUri",
                                f"the ray backend does not build the environments of Google's pre-built images "
                                f"({prebuilt.name})", "run the job on the local backend (--backend local), or "
                                "build an image with the job's packages and name it instead"))
    problems += [
        Problem(f"trainingInput.packageUris[{index}]", f"{uri!r} is a path on this machine, not a staged package",
                "give packages as gs:// URIs or pass them with --packages, which stages them")
        for index, uri in enumerate(training_input.package_uris or []) if not uri.startswith("gs://")
    ]
    problems += [Problem(f"trainingInput.args[{index}]", error.message, error.hint)
                 for index, error in unmappable_args(training_input.args)]
    try:
        groups = resolve_cluster(training_input, catalog)
    except KeyError:
        return problems  # an unknown tier is the validator's to report
    for group in groups:
        if is_tpu(group, catalog):
            problems.append(Problem(
                "trainingInput.scaleTier" if training_input.scale_tier == "BASIC_TPU" else "trainingInput",
                f"the {group.role} replicas ask for Cloud TPUs ({group.accelerator_type or group.machine_type}), "
                "which a Ray cluster does not have",
                "use GPUs (acceleratorConfig type NVIDIA_*) or CPUs only, or use --backend vertex",
            ))
            break
    return problems


def _machine_size(machine_type: str | None, catalog: Catalog) -> tuple[int, float]:
    """(vCPUs, memory GB) of a machine type; legacy names use their Compute Engine equivalent."""
    machine = catalog.machine_types.get(machine_type or "")
    if machine is not None and machine.compute_engine:
        machine = catalog.machine_types.get(machine.compute_engine, machine)
    if machine is None or not machine.vcpus:
        return 1, 1.0  # the validator reports unknown types; this only keeps dry-run printable
    return machine.vcpus, machine.memory_gb


def bundles_for(groups: list[ReplicaGroup], catalog: Catalog, scale: float = 1.0) -> list[Bundle]:
    """One bundle per replica, in replica order (primary, workers, parameter servers, evaluators)."""
    by_role = {group.role: group for group in groups}
    bundles = []
    for task in replica_tasks(groups):
        group = by_role[task.role]
        vcpus, memory_gb = _machine_size(group.machine_type, catalog)
        cpus = max(0.01, math.floor(vcpus * scale * 100) / 100)
        bundles.append(Bundle(
            task_name=task.task_name,
            machine_type=group.machine_type,
            cpus=cpus,
            memory_bytes=int(memory_gb * scale * 1e9),
            gpus=group.accelerator_count if group.accelerator_type and not is_tpu(group, catalog) else 0,
            container=group.image_uri is not None,
        ))
    return bundles


def notes(training_input: TrainingInput, scale: float) -> list[str]:
    """WARNING lines for the job's log: what runs differently from the service."""
    lines = []
    if scale < 1:
        lines.append(f"--ray-resource-scale {scale:g}: each replica reserves {scale:g} of its machine type's CPUs "
                     "and memory on the cluster, not the whole machine type.")
    if training_input.region:
        # gcloud's command lines always name a region, so it is accepted; a Ray cluster has none.
        lines.append(f"The region {training_input.region} is not used: the job runs on the Ray cluster it was "
                     "submitted to.")
    return lines


def replica_environments(training_input: TrainingInput, bundles: list[Bundle], catalog: Catalog,
                         mode: str) -> dict[str, dict[str, Any]]:
    """Task name -> the environment its replica runs in, as planned (each node resolves it against
    its own interpreters when the job runs, and the log says what it found)."""
    if runs_containers(training_input):
        return {bundle.task_name: {"container": "its image, on its node's engine"} for bundle in bundles}
    if mode == "cluster":
        return {bundle.task_name: {"python": "the node's own (AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster)"}
                for bundle in bundles}
    resolution = planned_resolution(training_input, catalog)
    return {bundle.task_name: {
        "environment": resolution.name,
        "tensorflow": resolution.tensorflow,
        "python": resolution.python,
        # A replica with GPUs gets the runtime's GPU build where its node has an NVIDIA GPU.
        "packages": [resolution.gpu_packages.get(p, p) if bundle.gpus else p for p in resolution.packages],
        "builtOn": f"its node, once per node, under {CACHE_VARIABLE} (default {DEFAULT_NODE_CACHE})",
    } for bundle in bundles}


def planned_resolution(training_input: TrainingInput, catalog: Catalog) -> RuntimeResolution:
    """The runtime's own environment, as a node with the runtime's first-choice Python resolves it."""
    def on_the_node(version: str, _env: Any) -> Interpreter:
        return Interpreter(version, f"python{version}", "the node")

    return resolve_runtime(training_input, catalog, find=on_the_node)


def runtime_notes(training_input: TrainingInput, catalog: Catalog, mode: str) -> list[str]:
    """INFO lines for the job's log: which environment the replicas run in, and where it comes from."""
    if runs_containers(training_input):
        return ["Each replica runs its image as a container on its node's engine (Docker, or Podman), on the "
                f"node's own network: nodes offering one declare the resource {CONTAINER_RESOURCE}."]
    runtime = catalog.runtime_for(training_input.runtime_version)
    assert runtime is not None  # validated
    if mode == "cluster":
        return [f"Runtime version {runtime.version}: the replicas run with the cluster's own Python "
                "(AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster); the trainer's dependencies must already be installed there."]
    planned = planned_resolution(training_input, catalog)
    fallback = catalog.environments[runtime.local_environment]
    why = f" ({planned.why})" if planned.why else ""
    return [
        f"Runtime version {runtime.version}: each replica runs TensorFlow {planned.tensorflow} on Python "
        f"{planned.python}{why}, in the runtime's own environment, built with uv on the replica's node (once per "
        f"node, under {CACHE_VARIABLE}, default {DEFAULT_NODE_CACHE}) and kept there for later jobs.",
        f"A node without Python {planned.python} (looked for as on this machine: AIPTRAIN_PYTHONS, uv's Pythons, "
        f"PATH, pyenv) has uv download it where AIPTRAIN_PYTHON_DOWNLOADS allows, else runs the fallback TensorFlow "
        f"{fallback.tensorflow} on Python {' to '.join(dict.fromkeys((fallback.pythons[0], fallback.pythons[-1])))}; "
        "the log says what each node runs.",
        "Runtime packages: " + ", ".join(package_label(p) for p in planned.packages) + ".",
    ]


def driver_payload(job: Job, project: str, groups: list[ReplicaGroup], catalog: Catalog, *,
                   scale: float, storage_root: str, policy: ReplicaSettings, packages_mode: str,
                   vertex_job_id: str | None = None) -> dict[str, Any]:
    """What the driver reads from aiptrain-job.json (`vertex_job_id`: the job runs a Vertex AI job,
    whose numeric ID its replicas see and whose words its failures take)."""
    training_input = job.training_input or TrainingInput()
    return {
        "project": project,
        "job": job.to_api(),
        "bundles": [
            {"taskName": bundle.task_name, "machineType": bundle.machine_type, "resources": bundle.resources()}
            for bundle in bundles_for(groups, catalog, scale)
        ],
        "placementStrategy": PLACEMENT_STRATEGY,
        "notes": notes(training_input, scale),
        "runtimeNotes": runtime_notes(training_input, catalog, packages_mode),
        "packagesMode": packages_mode,
        "runtime": runtime_spec(training_input, catalog, job.labels),
        "storageRoot": storage_root,
        "vertexJobId": vertex_job_id,
        # Whether the replicas are containers, answered here once for the whole run: the driver and
        # every replica set it starts follow this (`Driver.runs_containers`).
        "containers": {"pull": ContainerSettings.from_env().pulls} if runs_containers(training_input) else None,
        "restartPolicy": {
            "maxRestarts": policy.max_restarts,
            "restartDelay": policy.restart_delay,
            "killGrace": policy.kill_grace,
            "evaluatorGrace": policy.evaluator_grace,
        },
    }


def job_metadata(job: Job, project: str) -> dict[str, str]:
    """The Ray job's metadata: the job's labels as they are, plus the project and the Job resource."""
    import json

    metadata = dict(job.labels or {})
    metadata[METADATA_PROJECT] = project
    metadata[METADATA_JOB] = json.dumps(job.to_api(), sort_keys=True)
    return metadata


def runtime_env(working_dir: str, aiptrain_dir: str, kill_grace: float) -> dict[str, Any]:
    """The runtime environment: the job's files as working_dir, aiptrain itself as a py_module.

    `ray job stop` gives the driver RAY_JOB_STOP_WAIT_TIME_S (3 s by default) before it kills it:
    enough here to stop the replicas as locally (SIGTERM, the grace, SIGKILL), stop environment
    builds and remove what they left, so that a cancelled job leaves nothing running on any node."""
    return {
        "working_dir": working_dir,
        "py_modules": [aiptrain_dir],
        "excludes": ["__pycache__", "*.pyc"],
        "env_vars": {"PYTHONUNBUFFERED": "1",
                     "RAY_JOB_STOP_WAIT_TIME_S": str(math.ceil(kill_grace) + STOP_MARGIN_SECONDS)},
    }


def ray_job_document(job: Job, project: str, groups: list[ReplicaGroup], catalog: Catalog, *, scale: float,
                     working_dir: str, aiptrain_dir: str, packages_mode: str, kill_grace: float) -> dict[str, Any]:
    """What is sent to the Jobs API (and what --dry-run prints): the replicas' environments and
    notes travel in the working directory, and are shown here too."""
    training_input = job.training_input or TrainingInput()
    bundles = bundles_for(groups, catalog, scale)
    return {
        "submissionId": job.job_id,
        "entrypoint": ENTRYPOINT,
        "runtimeEnv": runtime_env(working_dir, aiptrain_dir, kill_grace),
        "metadata": job_metadata(job, project),
        "placementGroup": {
            "strategy": PLACEMENT_STRATEGY,
            "bundles": [{"taskName": b.task_name, "machineType": b.machine_type, **b.resources()} for b in bundles],
        },
        "replicaEnvironments": replica_environments(training_input, bundles, catalog, packages_mode),
        "runtimeNotes": runtime_notes(training_input, catalog, packages_mode),
        **tuning_plan(training_input),
    }


def tuning_plan(training_input: TrainingInput) -> dict[str, Any]:
    """How a tuning job's trials use the cluster (nothing for other jobs)."""
    spec = training_input.hyperparameters
    if spec is None:
        return {}
    return {"trials": {
        "maxTrials": spec.max_trials or 1,
        "maxParallelTrials": spec.max_parallel_trials or 1,
        "placement": "each trial reserves a placement group of its own with the bundles above; "
                     "trials beyond the room the cluster has wait for it",
    }}
