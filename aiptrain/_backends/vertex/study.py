"""An ml v1 tuning job as a Vertex AI HyperparameterTuningJob, and back.

Forward (`job_to_hyperparameter_tuning_job`): the trial job is the CustomJob spec of
`vertex.translate.job_to_custom_job` (`trialJobSpec`); the HyperparameterSpec becomes:

- `hyperparameterMetricTag` (default `training/hptuning/metric`) and `goal` (unspecified:
  MAXIMIZE) -> `studySpec.metrics[0]` `{metricId, goal}`;
- `params[]` -> `studySpec.parameters[]`: `parameterId`, one of `doubleValueSpec`,
  `integerValueSpec`, `categoricalValueSpec`, `discreteValueSpec`, and `scaleType`;
- `algorithm` -> `studySpec.algorithm` (left out when unspecified: Bayesian on both);
- the last report is the final metric -> `studySpec.measurementSelectionType: LAST_MEASUREMENT`;
- `enableTrialEarlyStopping` -> `studySpec.medianAutomatedStoppingSpec` (the same median rule);
- `maxTrials`, `maxParallelTrials`, `maxFailedTrials` -> `maxTrialCount`, `parallelTrialCount`,
  `maxFailedTrialCount` (0 or unset is left out: the service decides).

`resumePreviousJobId` has no Vertex counterpart and is refused by `vertex.translate`.

Reverse (`hyperparameter_tuning_job_to_job`): the ml v1 Job `describe` shows, with the trials as
`trainingOutput.trials` (best first). Trial states fold onto ml v1's: REQUESTED -> QUEUED,
ACTIVE/STOPPING -> RUNNING, SUCCEEDED -> SUCCEEDED, INFEASIBLE -> FAILED. Vertex has no flag for
a trial stopped early, so `isTrialStoppedEarly` does not survive the round trip.
"""

from __future__ import annotations

from typing import Any

from aiptrain._backends.vertex.translate import custom_job_to_job, job_to_custom_job, vertex_problems
from aiptrain._job.catalog import Catalog, load_catalog
from aiptrain._job.spec import (
    FinalMetric,
    HyperparameterOutput,
    HyperparameterSpec,
    Job,
    JobState,
    ParameterSpec,
    ParameterType,
    ScaleType,
)
from aiptrain._tuning.plan import DEFAULT_METRIC_TAG, maximizes
from aiptrain._tuning.space import CategoricalParameter, IntegerParameter, Parameter, format_value, parameter_from_spec
from aiptrain._tuning.trials import tuning_output
from aiptrain.errors import ValidationFailed

_STOPPING_SPECS = ("medianAutomatedStoppingSpec", "decayCurveStoppingSpec", "convexAutomatedStoppingSpec")

# Vertex Trial.state -> the state of an ml v1 HyperparameterOutput.
TRIAL_TO_ML_STATE: dict[str, JobState] = {
    "STATE_UNSPECIFIED": JobState.STATE_UNSPECIFIED,
    "REQUESTED": JobState.QUEUED,
    "ACTIVE": JobState.RUNNING,
    "STOPPING": JobState.RUNNING,
    "SUCCEEDED": JobState.SUCCEEDED,
    "INFEASIBLE": JobState.FAILED,
}
# ml v1 trial state -> Vertex Trial.state (the emulator's answer). Vertex has no failed or
# cancelled trial: both are INFEASIBLE, with the reason.
ML_TO_TRIAL_STATE: dict[JobState, str] = {
    JobState.STATE_UNSPECIFIED: "STATE_UNSPECIFIED",
    JobState.QUEUED: "REQUESTED",
    JobState.PREPARING: "REQUESTED",
    JobState.RUNNING: "ACTIVE",
    JobState.CANCELLING: "STOPPING",
    JobState.SUCCEEDED: "SUCCEEDED",
    JobState.FAILED: "INFEASIBLE",
    JobState.CANCELLED: "INFEASIBLE",
}


def is_tuning_job(job: Job) -> bool:
    return job.training_input is not None and job.training_input.hyperparameters is not None


# -- forward ----------------------------------------------------------------------------------


def _parameter_spec(param: ParameterSpec) -> dict[str, Any]:
    kind = param.type or ParameterType.PARAMETER_TYPE_UNSPECIFIED
    spec: dict[str, Any] = {"parameterId": param.parameter_name or ""}
    if kind == ParameterType.DOUBLE:
        spec["doubleValueSpec"] = {"minValue": param.min_value, "maxValue": param.max_value}
    elif kind == ParameterType.INTEGER:
        spec["integerValueSpec"] = {"minValue": str(int(param.min_value or 0)),
                                    "maxValue": str(int(param.max_value or 0))}
    elif kind == ParameterType.CATEGORICAL:
        spec["categoricalValueSpec"] = {"values": list(param.categorical_values or [])}
    elif kind == ParameterType.DISCRETE:
        spec["discreteValueSpec"] = {"values": list(param.discrete_values or [])}
    scale = param.scale_type
    if kind != ParameterType.CATEGORICAL and scale is not None and scale != ScaleType.NONE:
        spec["scaleType"] = scale.value
    return spec


def study_spec(spec: HyperparameterSpec) -> dict[str, Any]:
    study: dict[str, Any] = {
        "metrics": [{"metricId": spec.hyperparameter_metric_tag or DEFAULT_METRIC_TAG,
                     "goal": "MAXIMIZE" if maximizes(spec.goal) else "MINIMIZE"}],
        "parameters": [_parameter_spec(param) for param in spec.params or []],
    }
    if spec.algorithm is not None and spec.algorithm.value != "ALGORITHM_UNSPECIFIED":
        study["algorithm"] = spec.algorithm.value
    study["measurementSelectionType"] = "BEST_MEASUREMENT" if spec.best_measurement else "LAST_MEASUREMENT"
    if spec.enable_trial_early_stopping:
        study["medianAutomatedStoppingSpec"] = {}
    return study


def job_to_hyperparameter_tuning_job(job: Job, catalog: Catalog) -> dict[str, Any]:
    """The HyperparameterTuningJob body for a job with `hyperparameters`; ValidationFailed lists
    what Vertex cannot express."""
    problems = vertex_problems(job, catalog)
    if problems:
        raise ValidationFailed(problems)
    assert job.training_input is not None and job.training_input.hyperparameters is not None
    spec = job.training_input.hyperparameters
    custom = job_to_custom_job(job, catalog)
    body: dict[str, Any] = {
        "displayName": custom["displayName"],
        "studySpec": study_spec(spec),
        "maxTrialCount": spec.max_trials or 1,
        "parallelTrialCount": spec.max_parallel_trials or 1,
    }
    if spec.max_failed_trials:
        body["maxFailedTrialCount"] = spec.max_failed_trials
    body["trialJobSpec"] = custom["jobSpec"]
    for key in ("labels", "encryptionSpec"):
        if key in custom:
            body[key] = custom[key]
    return body


def vertex_request_body(job: Job, catalog: Catalog) -> dict[str, Any]:
    """What the vertex backend sends: a HyperparameterTuningJob for tuning jobs, else a CustomJob."""
    if is_tuning_job(job):
        return job_to_hyperparameter_tuning_job(job, catalog)
    return job_to_custom_job(job, catalog)


# -- reverse ----------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _ml_parameter(vertex: dict[str, Any]) -> dict[str, Any]:
    param: dict[str, Any] = {"parameterName": vertex.get("parameterId") or ""}
    if "doubleValueSpec" in vertex:
        values = vertex["doubleValueSpec"] or {}
        param.update(type="DOUBLE", minValue=_number(values.get("minValue")),
                     maxValue=_number(values.get("maxValue")))
    elif "integerValueSpec" in vertex:
        values = vertex["integerValueSpec"] or {}
        param.update(type="INTEGER", minValue=_number(values.get("minValue")),
                     maxValue=_number(values.get("maxValue")))
    elif "categoricalValueSpec" in vertex:
        param.update(type="CATEGORICAL", categoricalValues=list((vertex["categoricalValueSpec"] or {})
                                                                .get("values") or []))
    elif "discreteValueSpec" in vertex:
        param.update(type="DISCRETE", discreteValues=[float(v) for v in (vertex["discreteValueSpec"] or {})
                                                      .get("values") or []])
    else:
        param["type"] = "PARAMETER_TYPE_UNSPECIFIED"
    scale = vertex.get("scaleType")
    if scale and scale != "SCALE_TYPE_UNSPECIFIED":
        param["scaleType"] = scale
    return {key: value for key, value in param.items() if value is not None}


def hyperparameters_from_study(tuning_job: dict[str, Any]) -> HyperparameterSpec:
    """The ml v1 HyperparameterSpec of a HyperparameterTuningJob."""
    study: dict[str, Any] = tuning_job.get("studySpec") or {}
    metric: dict[str, Any] = (study.get("metrics") or [{}])[0]
    data: dict[str, Any] = {
        "goal": "MINIMIZE" if metric.get("goal") == "MINIMIZE" else "MAXIMIZE",
        "hyperparameterMetricTag": metric.get("metricId") or DEFAULT_METRIC_TAG,
        "params": [_ml_parameter(p) for p in study.get("parameters") or []],
        "maxTrials": int(tuning_job.get("maxTrialCount") or 1),
        "maxParallelTrials": int(tuning_job.get("parallelTrialCount") or 1),
    }
    if study.get("algorithm") in ("GRID_SEARCH", "RANDOM_SEARCH"):
        data["algorithm"] = study["algorithm"]
    if int(tuning_job.get("maxFailedTrialCount") or 0):
        data["maxFailedTrials"] = int(tuning_job["maxFailedTrialCount"])
    if any(key in study for key in _STOPPING_SPECS):
        data["enableTrialEarlyStopping"] = True
    if study.get("measurementSelectionType") == "BEST_MEASUREMENT":
        data["bestMeasurement"] = True
    return HyperparameterSpec.model_validate(data)


def _parameters_by_name(spec: HyperparameterSpec) -> dict[str, Parameter]:
    found: dict[str, Parameter] = {}
    for param in spec.params or []:
        try:
            found[param.parameter_name or ""] = parameter_from_spec(param)
        except ValueError:
            continue
    return found


def _value_text(parameter: Parameter | None, value: Any) -> str:
    if parameter is None or value is None:
        return "" if value is None else str(value)
    if isinstance(parameter, CategoricalParameter):
        return str(value)
    number = _number(value)
    return str(value) if number is None else format_value(parameter, number)


def trial_to_output(trial: dict[str, Any], spec: HyperparameterSpec) -> HyperparameterOutput:
    """A Vertex Trial as an ml v1 HyperparameterOutput (hyperparameters as the trainer saw them)."""
    parameters = _parameters_by_name(spec)
    hyperparameters = {
        str(p.get("parameterId")): _value_text(parameters.get(str(p.get("parameterId"))), p.get("value"))
        for p in trial.get("parameters") or []
    }
    final = None
    measurement: dict[str, Any] = trial.get("finalMeasurement") or {}
    tag = spec.hyperparameter_metric_tag or DEFAULT_METRIC_TAG
    metrics = measurement.get("metrics") or []
    chosen = next((m for m in metrics if m.get("metricId") == tag), metrics[0] if metrics else None)
    if chosen is not None and _number(chosen.get("value")) is not None:
        final = FinalMetric(training_step=int(measurement.get("stepCount") or 0),
                            objective_value=_number(chosen.get("value")))
    return HyperparameterOutput(
        trial_id=str(trial.get("id") or ""),
        hyperparameters=hyperparameters,
        final_metric=final,
        start_time=trial.get("startTime"),
        end_time=trial.get("endTime"),
        state=TRIAL_TO_ML_STATE.get(str(trial.get("state") or ""), JobState.STATE_UNSPECIFIED),
    )


def hyperparameter_tuning_job_to_job(tuning_job: dict[str, Any], catalog: Catalog | None = None) -> Job:
    """Present a HyperparameterTuningJob as an ml v1 Job: the trial job plus hyperparameters and trials."""
    catalog = catalog or load_catalog()
    shared = ("name", "displayName", "labels", "encryptionSpec", "state", "createTime", "startTime", "endTime",
              "error")
    as_custom: dict[str, Any] = {key: tuning_job[key] for key in shared if key in tuning_job}
    as_custom["jobSpec"] = tuning_job.get("trialJobSpec") or {}
    job = custom_job_to_job(as_custom, catalog)
    spec = hyperparameters_from_study(tuning_job)
    assert job.training_input is not None
    job.training_input.hyperparameters = spec
    trials = [trial_to_output(trial, spec) for trial in tuning_job.get("trials") or []]
    job.training_output = tuning_output(trials, metric_tag=spec.hyperparameter_metric_tag or DEFAULT_METRIC_TAG,
                                        maximize=maximizes(spec.goal), previous=job.training_output)
    return job


# -- the emulator's direction: ml v1 trials as Vertex Trials --------------------------------------


def _vertex_value(parameter: Parameter | None, text: str) -> Any:
    if parameter is None or isinstance(parameter, CategoricalParameter):
        return text
    number = _number(text)
    if number is None:
        return text
    return int(number) if isinstance(parameter, IntegerParameter) else number


def output_to_trial(output: HyperparameterOutput, spec: HyperparameterSpec) -> dict[str, Any]:
    """An ml v1 trial as a Vertex Trial (what the emulator's HyperparameterTuningJob lists)."""
    parameters = _parameters_by_name(spec)
    state = output.state or JobState.STATE_UNSPECIFIED
    trial: dict[str, Any] = {
        "id": output.trial_id or "",
        "state": ML_TO_TRIAL_STATE.get(state, "STATE_UNSPECIFIED"),
        "parameters": [{"parameterId": name, "value": _vertex_value(parameters.get(name), text)}
                       for name, text in (output.hyperparameters or {}).items()],
    }
    metric = output.final_metric
    if metric is not None and metric.objective_value is not None:
        trial["finalMeasurement"] = {
            "stepCount": str(metric.training_step or 0),
            "metrics": [{"metricId": spec.hyperparameter_metric_tag or DEFAULT_METRIC_TAG,
                         "value": metric.objective_value}],
        }
    if state == JobState.FAILED:
        trial["infeasibleReason"] = "The trial failed."
    elif state == JobState.CANCELLED:
        trial["infeasibleReason"] = "The trial was cancelled."
    for key, value in (("startTime", output.start_time), ("endTime", output.end_time)):
        if value:
            trial[key] = value
    return trial
