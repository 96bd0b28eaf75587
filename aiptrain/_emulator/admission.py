"""A job created over REST passes the checks a `jobs submit training` passes before it runs.

The CLI refuses, before anything is created, what the local backend cannot or must not run: the
job's own problems (`validate_job`: counts, sizes, labels, tuning limits), more processes than this
machine's replica cap (`local_problems`, 16 unless AIPTRAIN_LOCAL_REPLICA_CAP shrinks jobs), and
arguments it cannot map. A client of the emulator gets the same refusals as a 400, one field
violation per problem. The emulator also insists that every package the job names is in the store
(after fetching it from the storage emulator): a job with no package of its own, or a missing one,
would otherwise run whatever module the runtime happens to have.

A valid job that only this machine cannot run (custom containers with no container engine here) is
`CannotRunHere`: the emulator answers it FAILED_PRECONDITION, as what else a local job cannot
honour, rather than INVALID_ARGUMENT, which says the request itself is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiptrain._job.spec import Job, TrainingInput
from aiptrain.errors import AiptrainError, Problem, ValidationFailed

if TYPE_CHECKING:
    from aiptrain._backends.local.runner import JobRunner


class CannotRunHere(ValidationFailed):
    """The request is valid, but this machine lacks what running it takes (a container engine)."""


def admission_refusal(job: Job, storage_root: Path, *, check_job: bool = True,
                      runner: JobRunner | None = None) -> ValidationFailed | None:
    """Why `job` may not start here, as the error to raise (`CannotRunHere` when nothing but this
    machine's lack of a container engine stands in its way); None when it may start.
    runner: what runs the server's jobs instead of this machine (a Ray cluster), whose refusals
    then replace this machine's."""
    problems = admission_problems(job, storage_root, check_job=check_job, runner=runner)
    if not problems:
        return None
    if runner is not None:
        return ValidationFailed(problems)
    missing_engine = _missing_engine_problems(job.training_input or TrainingInput())
    if missing_engine and all(problem in missing_engine for problem in problems):
        return CannotRunHere(problems)
    return ValidationFailed(problems)


def admission_problems(job: Job, storage_root: Path, *, check_job: bool = True,
                       runner: JobRunner | None = None) -> list[Problem]:
    """Why `job` may not start here; [] when it may.

    check_job: also run the CLI's validation of the ml v1 job itself (off for Vertex AI jobs,
    whose requests were checked in their own terms and translated).
    """
    from aiptrain._job.catalog import load_catalog
    from aiptrain._job.validate import validate_job
    from aiptrain._replicas.cluster_plan import local_problems
    from aiptrain._replicas.gs_paths import unmappable_args
    from aiptrain._replicas.settings import ReplicaSettings

    catalog = load_catalog()
    problems = validate_job(job, catalog, require_packages=True) if check_job else []
    if problems:
        return problems  # the cluster of an invalid job cannot be planned
    try:
        settings = ReplicaSettings.from_env()
    except AiptrainError as error:
        return [Problem("environment", error.message, error.hint)]
    ti = job.training_input
    if runner is not None:
        # Its packages first: the cluster's checks would otherwise name the cluster, not the upload.
        packages = _missing_packages(list(ti.package_uris or []), storage_root) if ti is not None else []
        return packages or runner.refusal(job)
    problems += local_problems(job, catalog, settings)
    if ti is None:
        return problems
    problems += [Problem(f"trainingInput.args[{index}]", error.message, error.hint)
                 for index, error in unmappable_args(list(ti.args or []))]
    problems += _missing_packages(list(ti.package_uris or []), storage_root)
    return problems


def _missing_packages(uris: list[str], storage_root: Path) -> list[Problem]:
    from aiptrain._storage.local import local_path_for

    problems = []
    for index, uri in enumerate(uris):
        try:
            path = local_path_for(uri, storage_root)
        except AiptrainError as error:
            problems.append(Problem(f"trainingInput.packageUris[{index}]", error.message))
            continue
        if not path.is_file():
            problems.append(Problem(f"trainingInput.packageUris[{index}]", f"{uri} does not exist",
                                    "upload the package first (gsutil cp, or aiptrain's --package-path)"))
    return problems


def _missing_engine_problems(training_input: TrainingInput) -> list[Problem]:
    """The problems a job of containers has here because no container engine answers; [] when one
    does, or when the job runs no containers."""
    from aiptrain._replicas.containers.container_engine import EngineUnavailable, find_engine
    from aiptrain._replicas.containers.images import container_problems, runs_containers
    from aiptrain._replicas.containers.settings import ContainerSettings

    if not runs_containers(training_input):
        return []
    settings = ContainerSettings.from_env()
    try:
        find_engine(settings)
    except EngineUnavailable:
        return container_problems(training_input, settings)
    return []
