"""The submit path from parsed flags to a created job: merge, validate, package, stage, create.

`submit` is the whole of `jobs submit training` without a command line (a CI pipeline can call it
with a `SubmitOptions`); `dry_run_document` is its `--dry-run`. Everything that can be wrong with
the input is found by `prepare` before any build output is uploaded or any job created; a dry run
stops after `prepare` and describes the plan.

Merge rules (flags win over --config). Where gcloud's merge hurt users, this one differs:
- `trainingInput.region` from the config is honoured (gcloud always overwrote it);
- config `packageUris` are kept, and the packages from flags are added after them (gcloud wiped them);
- `enableWebAccess` is sent only when the flag or the config sets it (gcloud always sent false);
- `--labels` are merged into the config's labels, a flag value winning per key (gcloud replaced them);
- the CUSTOM-tier check applies to a scale tier from the config too (gcloud only checked the flag).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain._job.catalog import Catalog
from aiptrain._job.spec import Job, parse_job_lenient
from aiptrain._job.validate import check_gs_uri, check_package_count, validate_job
from aiptrain._submit.flags import OPTION_FLAGS, PAIRED_FLAGS, Kind, flag_field
from aiptrain.errors import Problem, ValidationFailed

if TYPE_CHECKING:
    from aiptrain._backends.base import Backend
    from aiptrain._job.cluster import ReplicaGroup
    from aiptrain._packaging import BuiltPackage
    from aiptrain._storage.base import ObjectStore
    from aiptrain._submit.staging import UploadPlan, UploadResult

# Staging bucket of the local store when the job names none: local runs need no cloud bucket.
LOCAL_DEFAULT_STAGING = "gs://aiptrain-local-staging"


@dataclass(frozen=True)
class Accelerator:
    type: str
    count: int


@dataclass
class SubmitOptions:
    """What the command line said; None means the flag was not given.

    One attribute per entry of `submit_flags.OPTION_FLAGS` (its `dest`), plus the job ID, the
    region and the trainer's own arguments.
    """

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
    # A Job's REST body standing in for a --config file (the Python API's `submit(job=...)`).
    config_body: dict[str, Any] | None = None


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

    from aiptrain._submit.config_file import parse_config_yaml, read_config_text

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
    if options.user_args is not None:
        ti["args"] = options.user_args
    for entry in OPTION_FLAGS:
        value = getattr(options, entry.dest)
        if entry.field is not None and value is not None:
            _put(ti, entry.field.split("."), _rest_value(entry.kind, value))
    if options.region is not None:
        ti["region"] = options.region
    elif not ti.get("region") and options.default_region:
        ti["region"] = options.default_region
    return body


def _rest_value(kind: Kind, value: Any) -> Any:
    """A SubmitOptions value as the REST API spells it."""
    if kind is Kind.COUNT:
        return str(value)
    if kind is Kind.ACCELERATOR:
        return {"type": value.type, "count": str(value.count)}
    if kind is Kind.GS_DIR and value.startswith("gs://") and "/" not in value[5:]:
        return value + "/"  # gs://bucket becomes gs://bucket/, as the service stored it
    return value


def _put(node: dict[str, Any], path: list[str], value: Any) -> None:
    """Set `value` at `path`, creating mappings on the way and merging into an existing one; a
    config value of the wrong type is left for parse_job to report with its path."""
    for key in path[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            return
        node = child
    existing = node.get(path[-1])
    if isinstance(value, dict) and isinstance(existing, dict):
        existing.update(value)
    elif isinstance(value, dict) and path[-1] in node:
        return
    else:
        node[path[-1]] = value


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
    from aiptrain._job.limits import check_package_archives
    from aiptrain._packaging import check_package_path
    from aiptrain._submit.staging import check_package_entries

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
    from aiptrain._job.cluster import resolve_cluster
    from aiptrain._submit.staging import classify_packages, plan_uploads

    problems: list[Problem] = list(flag_problems or [])
    config: dict[str, Any] | None = copy.deepcopy(options.config_body) if options.config_body else None
    if options.config_path is not None and config is None:
        try:
            config = load_config(options.config_path)
        except ValidationFailed as failed:
            raise ValidationFailed([*problems, *failed.problems]) from None
    body = merge_job(options, config)
    # Unknown fields are reported but do not stop validation, so a typo in the config does not
    # hide the job's other problems; only a structure that cannot be parsed at all stops here.
    job, parse_problems = parse_job_lenient(body, source=_config_source(options) if config else "")
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
        from aiptrain._packaging import build_package

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
    too_many = check_package_count(uris, catalog)
    if too_many:
        raise ValidationFailed(too_many)
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


# The job fields of the paired replica flags. A flag problem (e.g. "--worker-machine-type:
# required when --worker-count is given") already tells the user what to type; the job-level
# complaint about the same field ("workerCount is 2 but no workerType is set") would say it again.
_PAIRED_FIELDS = {flag: flag_field(flag) for pair in PAIRED_FLAGS for flag in pair}


def _config_source(options: SubmitOptions) -> str:
    return "job" if options.config_body else f"--config {options.config_path}"


def _not_covered_by_flags(job_problems: list[Problem], flag_problems: list[Problem]) -> list[Problem]:
    """`job_problems` minus those on a field whose paired flag already has a problem."""
    covered = {_PAIRED_FIELDS[p.path] for p in flag_problems if p.path in _PAIRED_FIELDS}
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
    from aiptrain._job.validate import check_job_id

    return check_job_id(options.job_id, catalog)


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
    from aiptrain._submit.staging import execute_uploads

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


def submit(
    options: SubmitOptions,
    *,
    backend: Backend,
    catalog: Catalog,
    store: ObjectStore,
    project: str,
    flag_problems: list[Problem] | None = None,
    on_upload: Callable[[UploadResult], None] | None = None,
    progress_factory: Any = None,
    on_warning: Callable[[str], None] | None = None,
) -> Job:
    """Validate, build, stage and create the job; returns it as the backend reports it.

    Raises ValidationFailed, with nothing uploaded or created, when the input is wrong.
    `on_upload` hears of each staged package (uploaded or reused), after all of them are staged;
    `on_warning` of what the backend says about how it runs the job, once it is created.
    """
    plan = prepare(options, backend=backend, catalog=catalog, store=store, project=project, dry_run=False,
                   flag_problems=flag_problems)
    _check_local_room(plan, store)
    for result in upload(plan, store, progress_factory=progress_factory):
        if on_upload is not None:
            on_upload(result)
    try:
        created = backend.create_job(plan.job)
    except KeyboardInterrupt:
        _raise_if_created(backend, plan)
        raise
    for warning in backend.submit_warnings(plan.job):
        if on_warning is not None:
            on_warning(warning)
    return created


def _check_local_room(plan: SubmissionPlan, store: ObjectStore) -> None:
    """Room on this machine for what a local store stages (see `disk_space`)."""
    root = store.root
    if root is None:
        return
    from aiptrain._submit.disk_space import check_room

    check_room(root, sum(upload.size for upload in plan.uploads if upload.status != "reuse"))


def _raise_if_created(backend: Backend, plan: SubmissionPlan) -> None:
    """After a Ctrl-C during the create: InterruptedAfterCreate naming the job if it exists.

    The create may have reached the backend before the interrupt (a REST call) or been let finish
    (the local engine defers Ctrl-C until the job's supervisor runs); one read tells which.
    """
    from aiptrain.errors import AiptrainError, InterruptedAfterCreate

    job_id = plan.job.job_id or ""
    try:
        backend.get_job(job_id)
    except (AiptrainError, KeyboardInterrupt, OSError):
        return
    flags = f"--backend {plan.backend_name} --project {plan.project}"
    raise InterruptedAfterCreate(job_id, [f"aiptrain jobs {verb} {job_id} {flags}"
                                          for verb in ("describe", "stream-logs", "cancel")]) from None


@dataclass(frozen=True)
class DryRun:
    """What a submit would do: the plan, and the document `--dry-run --format json` prints."""

    plan: SubmissionPlan
    document: dict[str, Any]


def dry_run_document(
    options: SubmitOptions,
    *,
    backend: Backend,
    catalog: Catalog,
    store: ObjectStore,
    project: str,
    flag_problems: list[Problem] | None = None,
) -> DryRun:
    """Everything `submit` would send and start, computed with nothing uploaded or created.

    The document (a stable schema a CI job can diff) holds the request body, the uploads, the
    cluster (on the local backend: the one that will really start, after the replica cap), each
    replica's TF_CONFIG and the Vertex AI body this job becomes, or why it cannot.
    """
    plan = prepare(options, backend=backend, catalog=catalog, store=store, project=project, dry_run=True,
                   flag_problems=flag_problems)
    view = backend.dry_run_view(plan.job, plan.request_body)
    if view.cluster is not None:
        plan.cluster = view.cluster
    plan.warnings.extend(view.warnings)
    document = plan_summary(plan, vertex=_vertex_translation(plan, catalog),
                            tf_configs=_tf_configs(plan, view.addresses))
    if view.runtime:
        document["localRuntime"] = view.runtime
    if view.containers:
        document["localContainers"] = view.containers
    return DryRun(plan, document)


def _vertex_translation(plan: SubmissionPlan, catalog: Catalog) -> dict[str, Any]:
    """The Vertex AI CustomJob (HyperparameterTuningJob for tuning) this job becomes, or why it cannot."""
    from aiptrain._backends.vertex.study import is_tuning_job, vertex_request_body

    kind = "hyperparameterTuningJob" if is_tuning_job(plan.job) else "customJob"
    try:
        return {kind: vertex_request_body(plan.job, catalog)}
    except ValidationFailed as failed:
        return {"problems": [p.render() for p in failed.problems]}


def _tf_configs(plan: SubmissionPlan, addresses: dict[str, list[str]] | None) -> dict[str, Any]:
    from aiptrain._job.tf_config import tf_configs_for

    return tf_configs_for(plan.job, plan.cluster, addresses)

