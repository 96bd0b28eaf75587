"""ml v1 `projects.jobs`: create, get, list, cancel and patch, served by the local engine.

The same rules as the service: the body is a Job checked against the discovery schema, the job
ID must start with a letter and hold only letters, digits and underscores (400 on `job_id`), a
taken ID is 409 ALREADY_EXISTS on `job.job_id`, a missing job 404 NOT_FOUND, cancelling a job
that ended 400 FAILED_PRECONDITION, an empty list `{}`. `patch` changes `labels` only (with
`etag` in the mask, only if the etag still matches: 409 ABORTED otherwise). A tuning job's
`hyperparameters` are checked on create (400 with one violation per problem) and its trials run
in the engine, reported in `trainingOutput`; every started job reports `consumedMLUnits` there.
Jobs created through the Vertex AI routes are not ml v1 jobs: they are neither listed nor found.
"""

from __future__ import annotations

from typing import Any

from aiptrain._emulator.errors import ApiError, field_error, from_aiptrain_error, invalid_argument
from aiptrain._emulator.ml_units import consumed_ml_units
from aiptrain._emulator.packages import check_args, check_output_dir, stage_packages
from aiptrain._emulator.schema import Violation
from aiptrain._emulator.services import Services, page_size
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import Job, parse_job, without_output_fields
from aiptrain._job.validate import check_hyperparameters, check_job_id, check_labels
from aiptrain.errors import AiptrainError, AlreadyExists, EtagMismatch, JobAlreadyFinished, NotFound, ValidationFailed

JOB_ID_RULE = "A name should start with a letter and contain only letters, numbers and underscores."
DUPLICATE_JOB_ID = "A job with this id already exists."
PATCHABLE_FIELDS = ("labels", "etag")
LIST_DEFAULT_PAGE_SIZE = 20
LIST_MAX_PAGE_SIZE = 100


def _not_found(project: str, job_id: str) -> ApiError:
    return ApiError("NOT_FOUND", f"Field: name Error: Job projects/{project}/jobs/{job_id} does not exist.")


def present_job(job: Job) -> dict[str, Any]:
    """The Job as the service returns it: the stored resource plus the ML units consumed so far."""
    body = job.to_api()
    units = consumed_ml_units(job, load_catalog())
    if units is not None:
        body.setdefault("trainingOutput", {})["consumedMLUnits"] = units
    return body


def _ml_job(services: Services, project: str, job_id: str) -> Job:
    """The ml v1 job; 404 for a missing job and for the engine job behind a Vertex AI job."""
    try:
        job = services.engine.get(project, job_id)
        runs_vertex_job = services.engine.vertex_job_id(project, job_id) is not None
    except NotFound:
        raise _not_found(project, job_id) from None
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="name") from None
    if runs_vertex_job:
        raise _not_found(project, job_id)
    return job


def create_job(services: Services, project: str, body: Any) -> dict[str, Any]:
    # The server sets its own etag as well.
    job_data = without_output_fields(services.validated("ml", "v1", body, "GoogleCloudMlV1__Job", "job"), "etag")
    job_id = str(job_data.get("jobId") or "")
    if check_job_id(job_id, load_catalog()):
        raise field_error("job_id", JOB_ID_RULE)
    if "predictionInput" in job_data:
        raise ApiError("FAILED_PRECONDITION", "Batch prediction jobs are not supported by the aiptrain "
                       "emulator; submit a training job (trainingInput).")
    if "trainingInput" not in job_data:
        raise field_error("job.training_input", "A training job needs a trainingInput.")
    training_input = job_data["trainingInput"]
    check_output_dir(training_input.get("jobDir"), services.storage_root, field="job.training_input.job_dir")
    check_args(training_input.get("args"), field_prefix="job.training_input.args")
    uris = training_input.get("packageUris") or []
    stage_packages(uris, services.storage_root, field_prefix="job.training_input.package_uris")
    try:
        job = parse_job(job_data)
        # The service checked a tuning spec on create, before anything ran.
        problems = check_hyperparameters(job.training_input.hyperparameters if job.training_input else None,
                                         load_catalog())
        if problems:
            raise ValidationFailed(problems)
        created = services.submit(project, job)
    except AlreadyExists:
        raise field_error("job.job_id", DUPLICATE_JOB_ID, status="ALREADY_EXISTS") from None
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="job") from None
    return present_job(created)


def get_job(services: Services, project: str, job_id: str) -> dict[str, Any]:
    return present_job(_ml_job(services, project, job_id))


def list_jobs(services: Services, project: str, query: dict[str, str]) -> dict[str, Any]:
    size = page_size(query, default=LIST_DEFAULT_PAGE_SIZE, maximum=LIST_MAX_PAGE_SIZE)
    try:
        jobs, token = services.engine.list(project, page_size=size, page_token=query.get("pageToken") or None,
                                           filter=query.get("filter") or None, vertex=False)
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="filter") from None
    response: dict[str, Any] = {}
    if jobs:
        response["jobs"] = [present_job(job) for job in jobs]
    if token:
        response["nextPageToken"] = token
    return response


def cancel_job(services: Services, project: str, job_id: str, body: Any) -> dict[str, Any]:
    services.validated("ml", "v1", body if body is not None else {}, "GoogleCloudMlV1__CancelJobRequest", "")
    job = _ml_job(services, project, job_id)
    try:
        services.engine.cancel(project, job_id)
    except NotFound:
        raise _not_found(project, job_id) from None
    except JobAlreadyFinished:
        state = job.state.value if job.state else "finished"
        raise field_error("name", f"Cannot cancel job projects/{project}/jobs/{job_id}: it is already in a "
                          f"terminal state ({state}).", status="FAILED_PRECONDITION") from None
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="name") from None
    return {}


def patch_job(services: Services, project: str, job_id: str, query: dict[str, str], body: Any) -> dict[str, Any]:
    """Replace the job's labels (the only field the service let a client change)."""
    data = services.validated("ml", "v1", body if body is not None else {}, "GoogleCloudMlV1__Job", "job")
    mask = [path.strip() for path in query.get("updateMask", "").split(",") if path.strip()]
    if not mask:
        raise field_error("update_mask", "An update mask is required: labels (and etag).")
    unsupported = [path for path in mask if path not in PATCHABLE_FIELDS]
    if unsupported:
        raise field_error("update_mask", f"Unsupported update mask path {unsupported[0]!r}: only labels and etag "
                          "can be updated.")
    labels = {str(k): str(v) for k, v in (data.get("labels") or {}).items()}
    problems = check_labels(labels, load_catalog())
    if problems:
        raise invalid_argument([Violation(f"job.{p.path}", p.message) for p in problems])
    current = _ml_job(services, project, job_id)
    expected_etag = str(data.get("etag") or "") if "etag" in mask else None
    try:
        updated = services.engine.update_labels(project, job_id, labels if "labels" in mask else None,
                                                expected_etag=expected_etag or None)
    except EtagMismatch:
        raise ApiError("ABORTED", f"The etag of job projects/{project}/jobs/{job_id} does not match "
                       f"{expected_etag!r}: the job changed since it was read (current etag "
                       f"{current.etag!r}).") from None
    except NotFound:
        raise _not_found(project, job_id) from None
    return present_job(updated)
