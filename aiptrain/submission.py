"""The submit path from parsed flags to a created job: merge, validate, package, stage, create.

Everything that can be wrong with the input is found by `prepare` before any build output is
uploaded or any job created; `--dry-run` stops after `prepare` and prints the plan.

Merge rules (flags win over --config). Where gcloud's merge hurt users, this one differs:
- `trainingInput.region` from the config is honoured (gcloud always overwrote it);
- config `packageUris` are kept, and the packages from flags are added after them (gcloud wiped them);
- `enableWebAccess` is sent only when the flag or the config sets it (gcloud always sent false);
- `--labels` are merged into the config's labels, a flag value winning per key (gcloud replaced them);
- the CUSTOM-tier check applies to a scale tier from the config too (gcloud only checked the flag).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain.catalog import Catalog
from aiptrain.errors import Problem, ValidationFailed
from aiptrain.spec import Job, parse_job_lenient
from aiptrain.validate import check_gs_uri, validate_job

if TYPE_CHECKING:
    from aiptrain.backends.base import Backend
    from aiptrain.cluster import ReplicaGroup
    from aiptrain.packaging import BuiltPackage
    from aiptrain.staging import UploadPlan, UploadResult
    from aiptrain.storage.base import ObjectStore

# Staging bucket of the local store when the job names none: local runs need no cloud bucket.
LOCAL_DEFAULT_STAGING = "gs://aiptrain-local-staging"


@dataclass(frozen=True)
class Accelerator:
    type: str
    count: int


@dataclass
class SubmitOptions:
    """What the command line said; None means the flag was not given."""

    job_id: str
    config_path: Path | None = None
    package_path: Path | None = None
    packages: list[str] | None = None
    module_name: str | None = None
    staging_bucket: str | None = None
    job_dir: str | None = None
    region: str | None = None
    scale_tier: str | None = None
    runtime_version: str | None = None
    python_version: str | None = None
    master_machine_type: str | None = None
    master_accelerator: Accelerator | None = None
    master_image_uri: str | None = None
    worker_machine_type: str | None = None
    worker_count: int | None = None
    worker_accelerator: Accelerator | None = None
    worker_image_uri: str | None = None
    parameter_server_machine_type: str | None = None
    parameter_server_count: int | None = None
    parameter_server_accelerator: Accelerator | None = None
    parameter_server_image_uri: str | None = None
    use_chief_in_tf_config: bool | None = None
    labels: dict[str, str] | None = None
    service_account: str | None = None
    kms_key: str | None = None
    enable_web_access: bool | None = None
    user_args: list[str] | None = None
    default_region: str | None = None


@dataclass
class SubmissionPlan:
    """Everything a submit will do, computed without side effects beyond a local build."""

    job: Job
    backend_name: str
    project: str
    request_body: dict[str, Any]
    package: BuiltPackage | None
    uploads: list[UploadPlan]
    cluster: list[ReplicaGroup]
    staging_bucket: str | None
    store_kind: str
    warnings: list[str] = field(default_factory=list)


def load_config(path: Path) -> dict[str, Any]:
    """Read a --config file (YAML or JSON; JSON is YAML) into a mapping."""
    import yaml

    from aiptrain.config_file import parse_config_yaml, read_config_text

    where = f"--config {path}"
    text = read_config_text(path)
    try:
        data = parse_config_yaml(path, text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(error, "problem", None) or str(error)
        raise ValidationFailed([Problem(where, f"is not valid YAML/JSON{line}: {reason}",
                                        "fix the syntax there: check indentation, quotes and brackets")]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValidationFailed([Problem(where, f"must hold a Job mapping, not a {type(data).__name__}",
                                        "start the file with `trainingInput:`")])
    return data


def _set_accelerator(ti: dict[str, Any], config_key: str, accel: Accelerator | None) -> None:
    if accel is None:
        return
    config = ti.setdefault(config_key, {})
    if not isinstance(config, dict):
        return
    accel_config = config.setdefault("acceleratorConfig", {})
    if isinstance(accel_config, dict):
        accel_config["type"] = accel.type
        accel_config["count"] = str(accel.count)


def _set_image(ti: dict[str, Any], config_key: str, image: str | None) -> None:
    if image is None:
        return
    config = ti.setdefault(config_key, {})
    if isinstance(config, dict):
        config["imageUri"] = image


def merge_job(options: SubmitOptions, config: dict[str, Any] | None) -> dict[str, Any]:
    """The REST body (before package URIs are known) from the config file and the flags."""
    body: dict[str, Any] = copy.deepcopy(config) if config else {}
    body["jobId"] = options.job_id
    if options.labels is not None:
        labels = body.get("labels")
        merged = dict(labels) if isinstance(labels, dict) else {}
        merged.update(options.labels)
        body["labels"] = dict(sorted(merged.items()))
    ti = body.setdefault("trainingInput", {})
    if not isinstance(ti, dict):
        return body  # parse_job reports the wrong type with its path
    scalars = {
        "pythonModule": options.module_name,
        "args": options.user_args,
        "jobDir": _normalise_job_dir(options.job_dir),
        "scaleTier": options.scale_tier,
        "runtimeVersion": options.runtime_version,
        "pythonVersion": options.python_version,
        "serviceAccount": options.service_account,
        "enableWebAccess": options.enable_web_access,
        "masterType": options.master_machine_type,
        "workerType": options.worker_machine_type,
        "parameterServerType": options.parameter_server_machine_type,
        "useChiefInTfConfig": options.use_chief_in_tf_config,
    }
    for key, value in scalars.items():
        if value is not None:
            ti[key] = value
    if options.region is not None:
        ti["region"] = options.region
    elif not ti.get("region") and options.default_region:
        ti["region"] = options.default_region
    for key, count in (("workerCount", options.worker_count),
                       ("parameterServerCount", options.parameter_server_count)):
        if count is not None:
            ti[key] = str(count)
    if options.kms_key is not None:
        ti.setdefault("encryptionConfig", {})["kmsKeyName"] = options.kms_key
    _set_accelerator(ti, "masterConfig", options.master_accelerator)
    _set_accelerator(ti, "workerConfig", options.worker_accelerator)
    _set_accelerator(ti, "parameterServerConfig", options.parameter_server_accelerator)
    _set_image(ti, "masterConfig", options.master_image_uri)
    _set_image(ti, "workerConfig", options.worker_image_uri)
    _set_image(ti, "parameterServerConfig", options.parameter_server_image_uri)
    return body


def _normalise_job_dir(job_dir: str | None) -> str | None:
    """gs://bucket becomes gs://bucket/, as the service stored it."""
    if job_dir and job_dir.startswith("gs://") and "/" not in job_dir[5:]:
        return job_dir + "/"
    return job_dir


def staging_bucket_for(options: SubmitOptions, store_kind: str) -> tuple[str | None, list[Problem]]:
    """--staging-bucket, else the bucket of --job-dir, else (local store only) a default bucket."""
    if options.staging_bucket is not None:
        bucket = options.staging_bucket.rstrip("/")
        return bucket, check_gs_uri("--staging-bucket", bucket, bucket_only=True)
    if options.job_dir and options.job_dir.startswith("gs://"):
        return "gs://" + options.job_dir[5:].split("/", 1)[0], []
    if store_kind == "local":
        return LOCAL_DEFAULT_STAGING, []
    return None, [Problem("--staging-bucket", "local packages need somewhere to be uploaded",
                          "pass --staging-bucket gs://my-bucket or --job-dir gs://my-bucket/path")]


def _package_problems(options: SubmitOptions, config_uris: list[str], has_image: bool) -> list[Problem]:
    from aiptrain.packaging import check_package_path
    from aiptrain.staging import check_package_entries
    from aiptrain.submit_limits import check_package_archives

    problems: list[Problem] = []
    if options.package_path is not None:
        problems += check_package_path(options.package_path)
    problems += check_package_entries(options.packages or [])
    problems += check_package_archives(options.packages or [])
    has_program = bool(options.package_path or options.packages or config_uris)
    if not has_program and not has_image:
        problems.append(Problem("--package-path", "no trainer package to run",
                                "pass --package-path trainer/ (the package directory) or --packages"))
    return problems


def prepare(
    options: SubmitOptions,
    *,
    backend: Backend,
    catalog: Catalog,
    store: ObjectStore,
    project: str,
    dry_run: bool,
    flag_problems: list[Problem] | None = None,
) -> SubmissionPlan:
    """Validate everything, build the package, and plan uploads; raise ValidationFailed on bad input."""
    from aiptrain.cluster import resolve_cluster
    from aiptrain.staging import classify_packages, plan_uploads

    problems: list[Problem] = list(flag_problems or [])
    config: dict[str, Any] | None = None
    if options.config_path is not None:
        try:
            config = load_config(options.config_path)
        except ValidationFailed as failed:
            raise ValidationFailed([*problems, *failed.problems]) from None
    body = merge_job(options, config)
    # Unknown fields are reported but do not stop validation, so a typo in the config does not
    # hide the job's other problems; only a structure that cannot be parsed at all stops here.
    job, parse_problems = parse_job_lenient(body, source=f"--config {options.config_path}" if config else "")
    if job is None:
        raise ValidationFailed(_dedupe([*problems, *parse_problems, *_flag_only_problems(options, catalog)]))
    problems += parse_problems
    ti = job.training_input
    assert ti is not None
    config_uris = list(ti.package_uris or [])
    has_image = bool(ti.master_config and ti.master_config.image_uri)
    problems += _not_covered_by_flags(validate_job(job, catalog, require_packages=False), problems)
    package_problems = _package_problems(options, config_uris, has_image)
    problems += package_problems
    remote: list[str] = []
    local_packages: list[Path] = []
    if not package_problems:
        remote, local_packages = classify_packages(options.packages or [])
    staging = None
    if options.package_path is not None or local_packages:
        staging, staging_problems = staging_bucket_for(options, store.kind)
        problems += staging_problems
    elif options.staging_bucket is not None:
        problems += check_gs_uri("--staging-bucket", options.staging_bucket.rstrip("/"), bucket_only=True)
    # A field the validator already complained about must change anyway; the backend saying so
    # again (e.g. "the local backend needs a Python module") would only repeat it.
    reported = {problem.path for problem in problems}
    problems += [problem for problem in backend.unsupported(job) if problem.path not in reported]
    if problems:
        raise ValidationFailed(_dedupe(problems))

    package = None
    files = list(local_packages)
    if options.package_path is not None:
        from aiptrain.packaging import build_package

        package = build_package(options.package_path)
        # The sdist's file name is known only now; two local files with one name would be staged
        # under the same object name, so refuse before anything is uploaded (gcloud does too).
        _check_built_name_is_unique(package.path, local_packages)
        files.append(package.path)
    uploads = []
    if files:
        assert staging is not None
        check_existing = not dry_run or store.kind == "local"
        uploads = plan_uploads(files, staging, store, check_existing=check_existing)
    uris = _unique([*config_uris, *remote, *(plan.uri for plan in uploads)])
    ti.package_uris = uris
    limit = int(catalog.limits["max_package_uris"])
    if len(uris) > limit:
        message = f"{len(uris)} packages; at most {limit}"
        raise ValidationFailed([Problem("trainingInput.packageUris", message,
                                        "combine dependencies into fewer packages")])
    return SubmissionPlan(
        job=job,
        backend_name=backend.name,
        project=project,
        request_body=backend.request_body(job),
        package=package,
        uploads=uploads,
        cluster=resolve_cluster(ti, catalog),
        staging_bucket=staging,
        store_kind=store.kind,
    )


# The job field each replica flag sets. A flag problem (e.g. "--worker-machine-type: required
# when --worker-count is given") already tells the user what to type; the job-level complaint about
# the same field ("workerCount is 2 but no workerType is set") would say it a second time.
_FLAG_FIELDS = {
    "--worker-machine-type": "trainingInput.workerType",
    "--worker-count": "trainingInput.workerCount",
    "--parameter-server-machine-type": "trainingInput.parameterServerType",
    "--parameter-server-count": "trainingInput.parameterServerCount",
}


def _not_covered_by_flags(job_problems: list[Problem], flag_problems: list[Problem]) -> list[Problem]:
    """`job_problems` minus those on a field whose flag already has a problem."""
    covered = {_FLAG_FIELDS[p.path] for p in flag_problems if p.path in _FLAG_FIELDS}
    return [problem for problem in job_problems if problem.path not in covered]


def _check_built_name_is_unique(built: Path, local_packages: list[Path]) -> None:
    clashes = [path for path in local_packages if path.name == built.name]
    if clashes:
        raise ValidationFailed([Problem(
            "--packages",
            f"{clashes[0]} has the same file name as the package built from --package-path "
            f"({built.name}); both cannot be uploaded",
            f"drop {clashes[0]} from --packages (--package-path already builds it), or rename it",
        )])


def _flag_only_problems(options: SubmitOptions, catalog: Catalog) -> list[Problem]:
    """Checks that need no parsed job, so a broken config still gets them reported too."""
    from aiptrain.validate import check_job_id

    return check_job_id(options.job_id, int(catalog.limits["job_id_max_length"]))


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[Problem] = set()
    unique = []
    for problem in problems:
        if problem not in seen:
            seen.add(problem)
            unique.append(problem)
    return unique


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def upload(plan: SubmissionPlan, store: ObjectStore, *, progress_factory: Any = None) -> list[UploadResult]:
    from aiptrain.staging import execute_uploads

    return execute_uploads(plan.uploads, store, progress_factory=progress_factory)


def plan_summary(plan: SubmissionPlan, *, vertex: dict[str, Any] | None,
                 tf_configs: dict[str, Any] | None) -> dict[str, Any]:
    """The dry-run document: a stable schema a CI job can diff."""
    package = None
    if plan.package is not None:
        package = {
            "path": str(plan.package.path),
            "name": plan.package.path.name,
            "sha256": plan.package.sha256,
            "size": plan.package.size,
            "cached": plan.package.reused_from_cache,
            "files": list(plan.package.files),
        }
    return {
        "dryRun": True,
        "backend": plan.backend_name,
        "project": plan.project,
        "request": plan.request_body,
        "package": package,
        "uploads": [
            {"source": str(u.local), "target": u.uri, "sha256": u.sha256, "size": u.size, "action": u.status}
            for u in plan.uploads
        ],
        "cluster": [
            {
                "role": g.role,
                "taskType": g.task_type,
                "count": g.count,
                "machineType": g.machine_type,
                "accelerator": ({"type": g.accelerator_type, "count": g.accelerator_count}
                                if g.accelerator_type else None),
                "taskNames": g.task_names(),
            }
            for g in plan.cluster
        ],
        "tfConfig": tf_configs,
        "vertex": vertex,
        "warnings": list(plan.warnings),
    }

