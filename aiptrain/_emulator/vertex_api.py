"""Vertex AI `projects.locations.customJobs`: create, get, list, cancel, over the local engine.

A CustomJob is reverse-translated into an ml v1 Job (worker pools -> a CUSTOM tier, the Python
package spec -> packages, module and args, the output directory -> the job dir) and run by the
engine; its state is reported with Vertex's JOB_STATE_* names. Refused with 400
FAILED_PRECONDITION, because a local job cannot honour them: pools running different Python
programs, and a job mixing containers and Python packages. Container pools (`containerSpec`) run as
containers (`replicas.containers`): each pool its image, command and args; the submit checks of the
local backend (an engine, the image here) apply. A pool's environment variables (`env`, of a
container or a Python package) reach its replicas, under the service's own (TF_CONFIG,
CLOUD_ML_JOB_ID, AIP_*).
Placement-only fields (network, reserved IP ranges, persistent resources, scheduling strategy,
TensorBoard, ...) are accepted and have no effect on a local run.

The job runs as Vertex runs a Python package: the chief pool's args exactly as sent (no
`--job-dir` added; the output directory arrives in AIP_MODEL_DIR and friends) and the numeric job
ID in CLOUD_ML_JOB_ID (the engine keeps it beside the job: `LocalJobEngine.submit(vertex_job_id=...)`).
Names come back with the project number, as Vertex returns them; either the project ID or that
number finds the job. A container image built by gcloud's auto-packaging (`--local-package-path`)
is refused with what to run instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiptrain._backends.vertex.translate import ML_TO_VERTEX_STATE, custom_job_to_job
from aiptrain._emulator.errors import ApiError, from_aiptrain_error, invalid_argument
from aiptrain._emulator.packages import check_args, check_output_dir, stage_packages
from aiptrain._emulator.query import FilterError, parse_filter
from aiptrain._emulator.schema import Violation
from aiptrain._emulator.services import Services, decode_token, encode_token, page_size
from aiptrain._emulator.vertex_jobs import TUNING_JOBS, VertexJobRecord, VertexJobStore, vertex_job_name
from aiptrain._job.spec import Job, JobState
from aiptrain.errors import AiptrainError, JobAlreadyFinished, NotFound

# The CustomJob fields a client sets; everything else is output only and ignored on create.
INPUT_FIELDS = ("displayName", "jobSpec", "labels", "encryptionSpec")
LIST_DEFAULT_PAGE_SIZE = 100
LIST_MAX_PAGE_SIZE = 1000
_CANCELLED_CODE = 1  # google.rpc.Code.CANCELLED, as Vertex reports a cancelled job's error
_FAILED_CODE = 3


def _not_found(name: str) -> ApiError:
    return ApiError("NOT_FOUND", f'The CustomJob "{name}" does not exist.')


def check_pools(spec: dict[str, Any], root: str = "custom_job.job_spec.worker_pool_specs") -> None:
    """Refuse worker pools a local job cannot run; `root` is the pools' field path in errors."""
    pools = spec.get("workerPoolSpecs") or []
    if not pools or not pools[0]:
        raise invalid_argument([Violation(root, "The first worker pool (the chief) must be specified.")])
    if len(pools) > 4:
        raise invalid_argument([Violation(root, "At most 4 worker pools can be specified.")])
    if str(pools[0].get("replicaCount", "1")) != "1":
        raise invalid_argument([Violation(f"{root}[0].replica_count",
                                          "The first worker pool must have exactly one replica.")])
    containers = bool(pools[0].get("containerSpec"))
    for index, pool in enumerate(pools):
        if not pool:
            continue
        if pool.get("containerSpec"):
            _check_container_pool(pool["containerSpec"], containers, f"{root}[{index}]")
            continue
        package = pool.get("pythonPackageSpec")
        if not package:
            raise invalid_argument([Violation(f"{root}[{index}]",
                                              "A worker pool needs a pythonPackageSpec or a containerSpec.")])
        if containers:
            raise _unsupported(f"{root}[{index}].python_package_spec",
                               "Every worker pool must run a container when the first one does, in the aiptrain "
                               "emulator.")
        _check_env(package.get("env") or [], f"{root}[{index}].python_package_spec.env")
        if _program(package) != _program(pools[0]["pythonPackageSpec"]):
            # A local job runs one program on every replica, as ml v1 did.
            raise _unsupported(f"{root}[{index}].python_package_spec",
                               "Every worker pool must run the same packages, module and args in the aiptrain "
                               "emulator.")


def _check_env(env: list[dict[str, Any]], field: str) -> None:
    """A pool's environment variables: each needs a name, and a name appears once (as on Vertex)."""
    seen: set[str] = set()
    for position, item in enumerate(env):
        name = str(item.get("name") or "")
        if not name:
            raise invalid_argument([Violation(f"{field}[{position}].name", "An environment variable needs a name.")])
        if name in seen:
            raise invalid_argument([Violation(f"{field}[{position}].name",
                                              f"The environment variable {name} is set twice.")])
        seen.add(name)


def _check_container_pool(container: dict[str, Any], containers: bool, pool_field: str) -> None:
    """A pool running a container: each pool may have its own image, command, args and variables (as
    ml v1's replica configs); the first pool must run one too."""
    field = f"{pool_field}.container_spec"
    _refuse_auto_packaged_image(container, field)
    if not containers:
        raise _unsupported(field, "Every worker pool must run a Python package when the first one does, in the "
                                  "aiptrain emulator.")
    _check_env(container.get("env") or [], f"{field}.env")


def _refuse_auto_packaged_image(container: dict[str, Any], field: str) -> None:
    """gcloud's `--local-package-path` builds an image (`.../cloudai-autogenerated/...`) and pushes it
    to a registry this machine does not read from."""
    if "/cloudai-autogenerated/" not in str(container.get("imageUri") or ""):
        return
    message = ("This job runs an image built by gcloud's auto-packaging (--local-package-path) and pushed to a "
               "registry the aiptrain emulator does not pull from. Build the package yourself (python -m "
               "build --sdist), upload it, and create the job with --python-package-uris=gs://BUCKET/PACKAGE and "
               "--worker-pool-spec=...,executor-image-uri=IMAGE,python-module=MODULE instead, or build the image "
               "here and name it in container-image-uri.")
    raise ApiError("FAILED_PRECONDITION", message, (Violation(field, message),))


def as_vertex_run(job: Job, record: VertexJobRecord, spec: dict[str, Any]) -> Job:
    """The engine job of a Vertex job: run under the record's engine ID, as Vertex runs it (see above)."""
    job.job_id = record.engine_job_id
    if job.training_input is not None and "pythonPackageSpec" in spec["workerPoolSpecs"][0]:
        args = spec["workerPoolSpecs"][0]["pythonPackageSpec"].get("args")
        job.training_input.args = list(args) if args else None
    return job


def _program(package: dict[str, Any]) -> tuple[Any, ...]:
    return (package.get("packageUris"), package.get("pythonModule"), package.get("args"))


def _unsupported(field: str, message: str) -> ApiError:
    return ApiError("FAILED_PRECONDITION", message, (Violation(field, message),))


def create_custom_job(services: Services, project: str, location: str, body: Any) -> dict[str, Any]:
    data = services.validated("aiplatform", "v1", body, "GoogleCloudAiplatformV1CustomJob", "custom_job")
    custom_job = {key: data[key] for key in INPUT_FIELDS if key in data}
    if not custom_job.get("displayName"):
        raise invalid_argument([Violation("custom_job.display_name", "The display name is required.")])
    spec = custom_job.get("jobSpec") or {}
    check_pools(spec)
    check_output_dir((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"), services.storage_root,
                     field="custom_job.job_spec.base_output_directory.output_uri_prefix")
    check_chief_program(services, spec, "custom_job.job_spec.worker_pool_specs")
    record = submit_to_engine(services, services.custom_jobs, project, location, custom_job, custom_job_to_job,
                              root="custom_job")
    return present(services, record)


def check_chief_program(services: Services, spec: dict[str, Any], pools_root: str) -> None:
    """Refuse the chief pool's unmappable args and stage its packages (`pools_root`: for errors).

    check_pools made every pool run the chief's program, so the chief's is all there is to check
    (a container's arguments are its own: the image may read them as it likes).
    """
    if "pythonPackageSpec" not in spec["workerPoolSpecs"][0]:
        return
    package_spec = spec["workerPoolSpecs"][0]["pythonPackageSpec"]
    check_args(package_spec.get("args"), field_prefix=f"{pools_root}[0].python_package_spec.args")
    stage_packages(package_spec.get("packageUris") or [], services.storage_root,
                   field_prefix=f"{pools_root}[0].python_package_spec.package_uris")


def submit_to_engine(services: Services, store: VertexJobStore, project: str, location: str,
                     request: dict[str, Any], to_job: Callable[[dict[str, Any]], Job], *,
                     root: str) -> VertexJobRecord:
    """Reserve the resource's name, then run its ml v1 translation on the engine; the name is
    given back if the engine refuses (the API error names fields under `root`) or anything fails."""
    record = store.reserve(project, location, request)
    try:
        # A CustomJob's program is in jobSpec, a tuning job's trials' in trialJobSpec.
        spec = request.get("jobSpec") or request.get("trialJobSpec") or {}
        job = as_vertex_run(to_job({**request, "name": record.name}), record, spec)
        services.submit(project, job, vertex_job_id=record.numeric_id, check_job=False)
    except AiptrainError as error:
        store.forget(record.numeric_id)
        raise from_aiptrain_error(error, root=root) from None
    except BaseException:
        store.forget(record.numeric_id)
        raise
    return record


def find_record(store: VertexJobStore, project: str, location: str, numeric_id: str,
                not_found: Callable[[str], ApiError]) -> VertexJobRecord:
    """The record of `store`'s collection with this ID, or the collection's NOT_FOUND."""
    record = store.get(project, location, numeric_id)
    if record is None:
        raise not_found(vertex_job_name(project, location, store.collection, numeric_id))
    return record


def _record(services: Services, project: str, location: str, numeric_id: str) -> VertexJobRecord:
    return find_record(services.custom_jobs, project, location, numeric_id, _not_found)


def present(services: Services, record: VertexJobRecord, job: Job | None = None) -> dict[str, Any]:
    """The CustomJob as Vertex returns it: the request plus name, state, times and error."""
    return present_vertex_job(services, record, job, not_found=_not_found)


def present_vertex_job(services: Services, record: VertexJobRecord, job: Job | None,
                       not_found: Callable[[str], ApiError]) -> dict[str, Any]:
    """A Vertex job (any collection) from its record and engine job: name, state, times, error."""
    if job is None:
        try:
            job = services.engine.get(record.project, record.engine_job_id)
        except NotFound:
            raise not_found(record.name) from None
    state = JobState(job.state or JobState.STATE_UNSPECIFIED)
    body: dict[str, Any] = {"name": services.vertex_name(record), **record.request,
                            "state": ML_TO_VERTEX_STATE[state]}
    if job.create_time:
        body["createTime"] = job.create_time
    if job.start_time:
        body["startTime"] = job.start_time
    if job.end_time:
        body["endTime"] = job.end_time
    body["updateTime"] = job.end_time or job.start_time or job.create_time
    if state == JobState.CANCELLED:
        body["error"] = {"code": _CANCELLED_CODE, "message": "CANCELED"}
    elif state == JobState.FAILED:
        body["error"] = {"code": _FAILED_CODE, "message": job.error_message or "The job failed."}
    return {key: value for key, value in body.items() if value is not None}


def get_custom_job(services: Services, project: str, location: str, numeric_id: str) -> dict[str, Any]:
    return present(services, _record(services, project, location, numeric_id))


def _filter_view(record: VertexJobRecord, presented: dict[str, Any]) -> dict[str, Any]:
    """The fields AIP-160 filters name (snake_case), for one job."""
    return {
        "display_name": presented.get("displayName", ""),
        "state": presented.get("state", ""),
        "labels": presented.get("labels") or {},
        "create_time": presented.get("createTime"),
        "update_time": presented.get("updateTime"),
        "name": presented.get("name", record.name),
    }


def list_custom_jobs(services: Services, project: str, location: str, query: dict[str, str]) -> dict[str, Any]:
    return list_vertex_jobs(services, services.custom_jobs, lambda record: present(services, record),
                            project, location, query)


def list_vertex_jobs(services: Services, store: VertexJobStore,
                     present_record: Callable[[VertexJobRecord], dict[str, Any]],
                     project: str, location: str, query: dict[str, str]) -> dict[str, Any]:
    """One page of a collection, newest first, filtered (AIP-160) and paged like Vertex."""
    size = page_size(query, default=LIST_DEFAULT_PAGE_SIZE, maximum=LIST_MAX_PAGE_SIZE)
    try:
        job_filter = parse_filter(query.get("filter"), time_fields=frozenset({"create_time", "update_time"}))
    except FilterError as error:
        raise invalid_argument([Violation("filter", str(error))]) from None
    offset = 0
    if query.get("pageToken"):
        token = decode_token(query["pageToken"])
        if token.get("filter") != query.get("filter", ""):
            raise invalid_argument([Violation("page_token", "The page token belongs to another filter.")])
        offset = int(token.get("offset", 0))
    matching: list[dict[str, Any]] = []
    for record in store.list(project, location):
        try:
            presented = present_record(record)
        except ApiError:
            continue  # its engine job is gone
        try:
            keep = job_filter.matches(_filter_view(record, presented))
        except FilterError as error:
            raise invalid_argument([Violation("filter", str(error))]) from None
        if keep:
            matching.append(presented)
    page = matching[offset:offset + size]
    response: dict[str, Any] = {}
    if page:
        response[store.collection] = page
    if offset + size < len(matching):
        response["nextPageToken"] = encode_token({"offset": offset + size, "filter": query.get("filter", "")})
    return response


def cancel_custom_job(services: Services, project: str, location: str, numeric_id: str,
                      body: Any) -> dict[str, Any]:
    services.validated("aiplatform", "v1", body if body is not None else {},
                       "GoogleCloudAiplatformV1CancelCustomJobRequest", "")
    return cancel_vertex_job(services, _record(services, project, location, numeric_id), _not_found)


def cancel_vertex_job(services: Services, record: VertexJobRecord,
                      not_found: Callable[[str], ApiError]) -> dict[str, Any]:
    try:
        services.engine.cancel(record.project, record.engine_job_id)
    except NotFound:
        raise not_found(record.name) from None
    except JobAlreadyFinished:
        job = services.engine.get(record.project, record.engine_job_id)
        state = ML_TO_VERTEX_STATE[JobState(job.state or JobState.STATE_UNSPECIFIED)]
        kind = "HyperparameterTuningJob" if record.collection == TUNING_JOBS else "CustomJob"
        raise ApiError("FAILED_PRECONDITION", f'Cannot cancel {kind} "{services.vertex_name(record)}": it is already '
                       f"in a terminal state ({state}).") from None
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="name") from None
    return {}
