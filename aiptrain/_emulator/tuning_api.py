"""Vertex AI `projects.locations.hyperparameterTuningJobs`: create, get, list, cancel, over the engine.

A HyperparameterTuningJob is reverse-translated into an ml v1 tuning job (`vertex.study`: its
`trialJobSpec` read as the customJobs route reads a CustomJob, its `studySpec` as
`hyperparameters`) and run by the engine's tuning body; it is reported with Vertex's JOB_STATE_*
names and its trials as Vertex Trials. Bodies are checked against the discovery schema like every
other route, then as Vertex does: display name, study spec, trial job spec, maxTrialCount and
parallelTrialCount are required, and the study must be valid (400 INVALID_ARGUMENT). Refused with
400 FAILED_PRECONDITION, because the local engine cannot honour them: what the customJobs route
refuses in the trial job, more than one metric, safety metrics, conditional parameters, study
stopping conditions, and stopping rules other than the median rule on steps. BEST_MEASUREMENT (the
Vertex AI SDK's default) makes a trial's best report its final metric, LAST_MEASUREMENT its last.
"""

from __future__ import annotations

from typing import Any

from aiptrain._backends.vertex.study import (
    hyperparameter_tuning_job_to_job,
    hyperparameters_from_study,
    output_to_trial,
)
from aiptrain._emulator.errors import ApiError, invalid_argument
from aiptrain._emulator.packages import check_output_dir
from aiptrain._emulator.schema import Violation
from aiptrain._emulator.services import Services
from aiptrain._emulator.vertex_api import (
    cancel_vertex_job,
    check_chief_program,
    check_pools,
    find_record,
    list_vertex_jobs,
    present_vertex_job,
    submit_to_engine,
)
from aiptrain._emulator.vertex_jobs import VertexJobRecord
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import Job
from aiptrain._job.validate import check_hyperparameters
from aiptrain._tuning.trials import trial_number
from aiptrain.errors import NotFound, Problem

ROOT = "hyperparameter_tuning_job"
INPUT_FIELDS = ("displayName", "studySpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount",
                "trialJobSpec", "labels", "encryptionSpec")
_REQUIRED = (("displayName", "display_name"), ("studySpec", "study_spec"), ("trialJobSpec", "trial_job_spec"),
             ("maxTrialCount", "max_trial_count"), ("parallelTrialCount", "parallel_trial_count"))
# ml v1 HyperparameterSpec field -> the HyperparameterTuningJob field it came from.
_FIELD_OF = {"maxTrials": "max_trial_count", "maxParallelTrials": "parallel_trial_count",
             "maxFailedTrials": "max_failed_trial_count"}


def _not_found(name: str) -> ApiError:
    return ApiError("NOT_FOUND", f'The HyperparameterTuningJob "{name}" does not exist.')


def _unsupported(field: str, message: str) -> ApiError:
    return ApiError("FAILED_PRECONDITION", message, (Violation(field, message),))


def _check_required(request: dict[str, Any]) -> None:
    missing = [Violation(f"{ROOT}.{name}", f"The {name.replace('_', ' ')} is required.")
               for key, name in _REQUIRED if not request.get(key)]
    if missing:
        raise invalid_argument(missing)


def _check_study(study: dict[str, Any]) -> None:
    root = f"{ROOT}.study_spec"
    metrics = study.get("metrics") or []
    if not metrics:
        raise invalid_argument([Violation(f"{root}.metrics", "At least one metric is required.")])
    if len(metrics) > 1:
        raise _unsupported(f"{root}.metrics", "The aiptrain emulator tunes one metric (ml v1's "
                           "hyperparameterMetricTag).")
    if metrics[0].get("safetyConfig"):
        raise _unsupported(f"{root}.metrics[0].safety_config", "Safety metrics are not supported by the aiptrain "
                           "emulator.")
    for index, parameter in enumerate(study.get("parameters") or []):
        if parameter.get("conditionalParameterSpecs"):
            raise _unsupported(f"{root}.parameters[{index}].conditional_parameter_specs",
                               "Conditional parameters are not supported by the aiptrain emulator.")
    if study.get("studyStoppingConfig"):
        raise _unsupported(f"{root}.study_stopping_config", "Study stopping conditions are not supported by the "
                           "aiptrain emulator; maxTrialCount ends the study.")
    for key, name in (("decayCurveStoppingSpec", "decay_curve_stopping_spec"),
                      ("convexAutomatedStoppingSpec", "convex_automated_stopping_spec")):
        if key in study:
            raise _unsupported(f"{root}.{name}", "The aiptrain emulator stops trials early with the median rule "
                               "only (medianAutomatedStoppingSpec).")
    if (study.get("medianAutomatedStoppingSpec") or {}).get("useElapsedDuration"):
        raise _unsupported(f"{root}.median_automated_stopping_spec.use_elapsed_duration",
                           "The aiptrain emulator compares trials at the same step, not the same elapsed time.")


def _violation(problem: Problem) -> Violation:
    """A HyperparameterSpec problem, pointed at the HyperparameterTuningJob field it came from."""
    parts = problem.path.removeprefix("trainingInput.hyperparameters").lstrip(".")
    head = parts.split(".", 1)[0].split("[", 1)[0]
    if head in _FIELD_OF:
        field = f"{ROOT}.{_FIELD_OF[head]}"
    elif parts.startswith("params["):
        field = f"{ROOT}.study_spec.parameters[{parts[len('params['):].split(']', 1)[0]}]"
    else:
        field = f"{ROOT}.study_spec"
    return Violation(field, problem.message + (f" ({problem.hint})" if problem.hint else ""))


def create_tuning_job(services: Services, project: str, location: str, body: Any) -> dict[str, Any]:
    data = services.validated("aiplatform", "v1", body, "GoogleCloudAiplatformV1HyperparameterTuningJob", ROOT)
    request = {key: data[key] for key in INPUT_FIELDS if key in data}
    _check_required(request)
    _check_study(request["studySpec"])
    spec = request["trialJobSpec"]
    pools_root = f"{ROOT}.trial_job_spec.worker_pool_specs"
    check_pools(spec, root=pools_root)
    check_output_dir((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix"), services.storage_root,
                     field=f"{ROOT}.trial_job_spec.base_output_directory.output_uri_prefix")
    problems = check_hyperparameters(hyperparameters_from_study(request), load_catalog())
    if problems:
        raise invalid_argument([_violation(problem) for problem in problems])
    check_chief_program(services, spec, pools_root)
    record = submit_to_engine(services, services.tuning_jobs, project, location, request,
                              hyperparameter_tuning_job_to_job, root=ROOT)
    return present(services, record)


def present(services: Services, record: VertexJobRecord) -> dict[str, Any]:
    """The HyperparameterTuningJob as Vertex returns it, with its trials in trial order."""
    try:
        job: Job = services.engine.get(record.project, record.engine_job_id)
    except NotFound:
        raise _not_found(record.name) from None
    body = present_vertex_job(services, record, job, _not_found)
    outputs = (job.training_output.trials if job.training_output else None) or []
    if outputs:
        spec = hyperparameters_from_study(record.request)
        ordered = sorted(outputs, key=trial_number)
        body["trials"] = [output_to_trial(output, spec) for output in ordered]
    return body


def _record(services: Services, project: str, location: str, numeric_id: str) -> VertexJobRecord:
    return find_record(services.tuning_jobs, project, location, numeric_id, _not_found)


def get_tuning_job(services: Services, project: str, location: str, numeric_id: str) -> dict[str, Any]:
    return present(services, _record(services, project, location, numeric_id))


def list_tuning_jobs(services: Services, project: str, location: str, query: dict[str, str]) -> dict[str, Any]:
    return list_vertex_jobs(services, services.tuning_jobs, lambda record: present(services, record),
                            project, location, query)


def cancel_tuning_job(services: Services, project: str, location: str, numeric_id: str,
                      body: Any) -> dict[str, Any]:
    services.validated("aiplatform", "v1", body if body is not None else {},
                       "GoogleCloudAiplatformV1CancelHyperparameterTuningJobRequest", "")
    return cancel_vertex_job(services, _record(services, project, location, numeric_id), _not_found)
