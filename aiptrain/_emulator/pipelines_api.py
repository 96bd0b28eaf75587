"""Vertex AI `projects.locations.trainingPipelines`: create, get, list, cancel, for custom training.

The Vertex AI SDK's `CustomTrainingJob`, `CustomPythonPackageTrainingJob` and
`CustomContainerTrainingJob` create a TrainingPipeline whose `trainingTaskInputs` is a CustomJob's
job spec (the custom task definition); Vertex runs it as a CustomJob, named in the pipeline's
`trainingTaskMetadata.backingCustomJob`. So does the emulator: the spec goes through the customJobs
route (checked, refused and run as a CustomJob is), and the pipeline reports that job's state
with PIPELINE_STATE_* names. Refused with 400 FAILED_PRECONDITION: other training task
definitions (AutoML), managed datasets (`inputDataConfig`: there is no dataset service here; read
the data from gs:// in the trainer) and `modelToUpload` (there is no model registry here).
"""

from __future__ import annotations

import re
from typing import Any

from aiptrain._emulator import vertex_api
from aiptrain._emulator.errors import ApiError, invalid_argument
from aiptrain._emulator.schema import Violation
from aiptrain._emulator.services import Services
from aiptrain._emulator.vertex_jobs import VertexJobRecord

ROOT = "training_pipeline"
CUSTOM_TASK = re.compile(r"^gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1\.0\.0\.yaml$")
INPUT_FIELDS = ("displayName", "trainingTaskDefinition", "trainingTaskInputs", "labels", "encryptionSpec")
_BACKING = "backingCustomJobId"  # kept in the record beside the request, never shown


def _not_found(name: str) -> ApiError:
    return ApiError("NOT_FOUND", f'The TrainingPipeline "{name}" does not exist.')


def _unsupported(field: str, message: str) -> ApiError:
    return ApiError("FAILED_PRECONDITION", message, (Violation(field, message),))


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camel_keys(value: Any, *, free: bool = False) -> Any:
    """trainingTaskInputs is a Struct: the SDK writes its keys in snake_case, the JSON API in
    camelCase; Vertex reads both. Values of `labels` are the user's own and keep their keys."""
    if isinstance(value, dict):
        return {(key if free else _camel(key)): _camel_keys(item, free=key == "labels") for key, item in value.items()}
    if isinstance(value, list):
        return [_camel_keys(item) for item in value]
    return value


def create_training_pipeline(services: Services, project: str, location: str, body: Any) -> dict[str, Any]:
    data = services.validated("aiplatform", "v1", body, "GoogleCloudAiplatformV1TrainingPipeline", ROOT)
    if not data.get("displayName"):
        raise invalid_argument([Violation(f"{ROOT}.display_name", "The display name is required.")])
    if data.get("inputDataConfig"):
        raise _unsupported(f"{ROOT}.input_data_config", "Managed datasets are not supported by the aiptrain "
                           "emulator (there is no dataset service): leave out the dataset and read the data "
                           "from gs:// in the trainer.")
    if data.get("modelToUpload"):
        raise _unsupported(f"{ROOT}.model_to_upload", "Uploading a model is not supported by the aiptrain emulator "
                           "(there is no model registry): leave out model_serving_container_image_uri; the "
                           "model stays in base_output_dir.")
    if not CUSTOM_TASK.match(str(data.get("trainingTaskDefinition") or "")):
        raise _unsupported(f"{ROOT}.training_task_definition", "The aiptrain emulator runs custom training "
                           "pipelines only (the custom_task_1.0.0.yaml definition), not AutoML.")
    inputs = data.get("trainingTaskInputs")
    if not isinstance(inputs, dict):
        raise invalid_argument([Violation(f"{ROOT}.training_task_inputs", "The training task inputs are required.")])
    spec = _camel_keys(inputs)
    custom_job: dict[str, Any] = {"displayName": f"{data['displayName']}-custom-job", "jobSpec": spec}
    for key in ("labels", "encryptionSpec"):
        if key in data:
            custom_job[key] = data[key]
    created = vertex_api.create_custom_job(services, project, location, custom_job)
    backing = str(created["name"]).rsplit("/", 1)[-1]
    request = {key: data[key] for key in INPUT_FIELDS if key in data}
    try:
        record = services.training_pipelines.reserve(project, location, {**request, _BACKING: backing})
    except BaseException:
        vertex_api.cancel_custom_job(services, project, location, backing, {})
        raise
    return present(services, record)


def present(services: Services, record: VertexJobRecord) -> dict[str, Any]:
    """The TrainingPipeline as Vertex returns it: its request, the backing job's state and times."""
    backing = services.custom_jobs.by_numeric_id(str(record.request.get(_BACKING)))
    if backing is None:
        raise _not_found(services.vertex_name(record))
    job = vertex_api.present_vertex_job(services, backing, None, lambda _name: _not_found(record.name))
    body: dict[str, Any] = {"name": services.vertex_name(record),
                            **{key: value for key, value in record.request.items() if key != _BACKING},
                            "state": job["state"].replace("JOB_STATE_", "PIPELINE_STATE_", 1),
                            "trainingTaskMetadata": {"backingCustomJob": job["name"]}}
    for key in ("createTime", "startTime", "endTime", "updateTime", "error"):
        if key in job:
            body[key] = job[key]
    return body


def _record(services: Services, project: str, location: str, numeric_id: str) -> VertexJobRecord:
    return vertex_api.find_record(services.training_pipelines, project, location, numeric_id, _not_found)


def get_training_pipeline(services: Services, project: str, location: str, numeric_id: str) -> dict[str, Any]:
    return present(services, _record(services, project, location, numeric_id))


def list_training_pipelines(services: Services, project: str, location: str,
                            query: dict[str, str]) -> dict[str, Any]:
    return vertex_api.list_vertex_jobs(services, services.training_pipelines,
                                       lambda record: present(services, record), project, location, query)


def cancel_training_pipeline(services: Services, project: str, location: str, numeric_id: str,
                             body: Any) -> dict[str, Any]:
    services.validated("aiplatform", "v1", body if body is not None else {},
                       "GoogleCloudAiplatformV1CancelTrainingPipelineRequest", "")
    record = _record(services, project, location, numeric_id)
    backing = services.custom_jobs.by_numeric_id(str(record.request.get(_BACKING)))
    if backing is None:
        raise _not_found(services.vertex_name(record))
    return vertex_api.cancel_vertex_job(services, backing, lambda _name: _not_found(services.vertex_name(record)))
