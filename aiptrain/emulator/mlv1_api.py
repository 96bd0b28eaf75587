"""ml v1 `projects.jobs`: create, get, list, cancel, served by the local engine.

The same rules as the service: the body is a Job checked against the discovery schema, the job
ID must start with a letter and hold only letters, digits and underscores (400 on `job_id`), a
taken ID is 409 ALREADY_EXISTS, a missing job 404 NOT_FOUND, an empty list `{}`. A tuning job's
`hyperparameters` are checked on create (400 with one violation per problem) and its trials run
in the engine, reported in `trainingOutput`.
"""

from __future__ import annotations

from typing import Any

from aiptrain.catalog import load_catalog
from aiptrain.emulator.errors import ApiError, field_error, from_aiptrain_error
from aiptrain.emulator.packages import check_args, check_output_dir, stage_packages
from aiptrain.emulator.services import Services, page_size
from aiptrain.errors import AiptrainError, NotFound, ValidationFailed
from aiptrain.spec import parse_job, without_output_fields
from aiptrain.validate import check_hyperparameters, check_job_id

JOB_ID_RULE = "A name should start with a letter and contain only letters, numbers and underscores."
LIST_DEFAULT_PAGE_SIZE = 20
LIST_MAX_PAGE_SIZE = 100


def _not_found(project: str, job_id: str) -> ApiError:
    return ApiError("NOT_FOUND", f"Field: name Error: Job projects/{project}/jobs/{job_id} does not exist.")


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
        created = services.engine.submit(project, job)
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="job") from None
    return created.to_api()


def get_job(services: Services, project: str, job_id: str) -> dict[str, Any]:
    try:
        return services.engine.get(project, job_id).to_api()
    except NotFound:
        raise _not_found(project, job_id) from None
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="name") from None


def list_jobs(services: Services, project: str, query: dict[str, str]) -> dict[str, Any]:
    size = page_size(query, default=LIST_DEFAULT_PAGE_SIZE, maximum=LIST_MAX_PAGE_SIZE)
    try:
        jobs, token = services.engine.list(project, page_size=size, page_token=query.get("pageToken") or None,
                                           filter=query.get("filter") or None)
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="filter") from None
    response: dict[str, Any] = {}
    if jobs:
        response["jobs"] = [job.to_api() for job in jobs]
    if token:
        response["nextPageToken"] = token
    return response


def cancel_job(services: Services, project: str, job_id: str, body: Any) -> dict[str, Any]:
    services.validated("ml", "v1", body if body is not None else {}, "GoogleCloudMlV1__CancelJobRequest", "")
    try:
        services.engine.cancel(project, job_id)
    except NotFound:
        raise _not_found(project, job_id) from None
    except AiptrainError as error:
        raise from_aiptrain_error(error, root="name") from None
    return {}
