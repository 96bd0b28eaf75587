"""A job created over REST passes the checks a `jobs submit training` passes before it runs.

The CLI refuses, before anything is created, what the local backend cannot or must not run: the
job's own problems (`validate_job`: counts, sizes, labels, tuning limits), more processes than this
machine's replica cap (`local_problems`, 16 unless AIPTRAIN_LOCAL_REPLICA_CAP shrinks jobs), and
arguments it cannot map. A client of the emulator gets the same refusals as a 400, one field
violation per problem. The emulator also insists that every package the job names is in the store
(after fetching it from the storage emulator): a job with no package of its own, or a missing one,
would otherwise run whatever module the runtime happens to have.
"""

from __future__ import annotations

from pathlib import Path

from aiptrain._job.spec import Job
from aiptrain.errors import AiptrainError, Problem


def admission_problems(job: Job, storage_root: Path, *, check_job: bool = True) -> list[Problem]:
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
    problems += local_problems(job, catalog, settings)
    ti = job.training_input
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
