"""The ml v1 resources as pydantic models, with the REST field names in and out.

`Job` is the one shape everything shares: the request body a submit sends, what the local store
keeps, what the emulator serves and what `--dry-run --format json` prints. Python attributes are
snake_case; the wire names are the REST camelCase aliases. int64 fields accept numbers or strings
and are written as strings, as the REST API does. Unknown fields are errors.
"""

from __future__ import annotations

import copy
import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel, to_snake

from aiptrain._job import state as job_state
from aiptrain.errors import Problem, ValidationFailed

# The job states live in a module without pydantic; every layer may import them from here too.
JobState = job_state.JobState
TERMINAL_STATES = job_state.TERMINAL_STATES


def _parse_int64(value: Any) -> Any:
    """Accept int64 as a JSON number or a decimal string, the way the REST API does."""
    if isinstance(value, bool):
        raise ValueError("expected an integer, not a boolean")
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("-").isdigit():
            raise ValueError(f"expected an integer, got {value!r}")
        return int(text)
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"expected an integer, got {value!r}")
        return int(value)
    return value


# int64 on the wire: read from a number or a string, always written as a string.
Int64 = Annotated[
    int,
    BeforeValidator(_parse_int64),
    PlainSerializer(str, return_type=str),
    WithJsonSchema({"type": "string", "format": "int64"}),
]


class ApiModel(BaseModel):
    """Base of every REST resource: camelCase aliases, unknown fields forbidden."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=False,
        # NaN and infinities are no value of any field; a stored NaN cannot even be served as JSON.
        allow_inf_nan=False,
    )

    def to_api(self) -> dict[str, Any]:
        """The REST representation: aliases, no unset/None fields, int64 as strings."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ApiEnum(enum.StrEnum):
    """An enum of the REST API: its names are read in any case and kept in the canonical one.

    The service's JSON front end took `scaleTier: "custom"` as CUSTOM (tensorflow-cloud sends
    it so), so a job stored or served here always holds the name as the API spells it.
    """

    @classmethod
    def _missing_(cls, value: object) -> ApiEnum | None:
        if isinstance(value, str):
            return cls.__members__.get(value.strip().upper())
        return None


class ScaleTier(ApiEnum):
    BASIC = "BASIC"
    STANDARD_1 = "STANDARD_1"
    PREMIUM_1 = "PREMIUM_1"
    BASIC_GPU = "BASIC_GPU"
    BASIC_TPU = "BASIC_TPU"
    CUSTOM = "CUSTOM"


class AcceleratorType(ApiEnum):
    ACCELERATOR_TYPE_UNSPECIFIED = "ACCELERATOR_TYPE_UNSPECIFIED"
    NVIDIA_TESLA_K80 = "NVIDIA_TESLA_K80"
    NVIDIA_TESLA_P100 = "NVIDIA_TESLA_P100"
    NVIDIA_TESLA_V100 = "NVIDIA_TESLA_V100"
    NVIDIA_TESLA_P4 = "NVIDIA_TESLA_P4"
    NVIDIA_TESLA_T4 = "NVIDIA_TESLA_T4"
    NVIDIA_TESLA_A100 = "NVIDIA_TESLA_A100"
    TPU_V2 = "TPU_V2"
    TPU_V3 = "TPU_V3"
    TPU_V2_POD = "TPU_V2_POD"
    TPU_V3_POD = "TPU_V3_POD"
    TPU_V4_POD = "TPU_V4_POD"


class Goal(ApiEnum):
    GOAL_TYPE_UNSPECIFIED = "GOAL_TYPE_UNSPECIFIED"
    MAXIMIZE = "MAXIMIZE"
    MINIMIZE = "MINIMIZE"


class Algorithm(ApiEnum):
    ALGORITHM_UNSPECIFIED = "ALGORITHM_UNSPECIFIED"
    GRID_SEARCH = "GRID_SEARCH"
    RANDOM_SEARCH = "RANDOM_SEARCH"


class ParameterType(ApiEnum):
    PARAMETER_TYPE_UNSPECIFIED = "PARAMETER_TYPE_UNSPECIFIED"
    DOUBLE = "DOUBLE"
    INTEGER = "INTEGER"
    CATEGORICAL = "CATEGORICAL"
    DISCRETE = "DISCRETE"


class ScaleType(ApiEnum):
    NONE = "NONE"
    UNIT_LINEAR_SCALE = "UNIT_LINEAR_SCALE"
    UNIT_LOG_SCALE = "UNIT_LOG_SCALE"
    UNIT_REVERSE_LOG_SCALE = "UNIT_REVERSE_LOG_SCALE"


class AcceleratorConfig(ApiModel):
    count: Int64 | None = None
    type: AcceleratorType | None = None


class DiskConfig(ApiModel):
    boot_disk_size_gb: int | None = None
    boot_disk_type: str | None = None


class ReplicaConfig(ApiModel):
    accelerator_config: AcceleratorConfig | None = None
    image_uri: str | None = None
    tpu_tf_version: str | None = None
    container_command: list[str] | None = None
    container_args: list[str] | None = None
    disk_config: DiskConfig | None = None
    # aiptrain's own, not ml v1's: a Vertex AI worker pool's environment variables (its
    # pythonPackageSpec.env / containerSpec.env), which the emulator's Vertex jobs run with.
    env: dict[str, str] | None = None

    @model_validator(mode="after")
    def _zero_accelerators_are_none(self) -> ReplicaConfig:
        """`acceleratorConfig: {count: 0}` asks for no accelerator, whatever its type (the service
        took it so: tensorflow-cloud sends `{count: "0", type: ACCELERATOR_TYPE_UNSPECIFIED}` for a
        CPU machine), so it is dropped rather than kept as an accelerator nobody can attach."""
        if self.accelerator_config is not None and self.accelerator_config.count == 0:
            self.accelerator_config = None
        return self


class Scheduling(ApiModel):
    max_running_time: str | None = None
    max_wait_time: str | None = None
    priority: int | None = None


class EncryptionConfig(ApiModel):
    kms_key_name: str | None = None


class ParameterSpec(ApiModel):
    parameter_name: str | None = None
    type: ParameterType | None = None
    min_value: float | None = None
    max_value: float | None = None
    categorical_values: list[str] | None = None
    discrete_values: list[float] | None = None
    scale_type: ScaleType | None = None


@dataclass(frozen=True)
class Role:
    """One replica role of a TrainingInput and the REST names of its fields, read by every layer."""

    name: str  # master | worker | parameter_server | evaluator
    type_field: str  # its machine type: masterType
    config_field: str  # its ReplicaConfig: masterConfig
    count_field: str | None  # its replica count: workerCount (None: there is exactly one master)

    def machine_type(self, training_input: TrainingInput) -> str | None:
        return cast("str | None", getattr(training_input, to_snake(self.type_field)))

    def config(self, training_input: TrainingInput) -> ReplicaConfig | None:
        return cast("ReplicaConfig | None", getattr(training_input, to_snake(self.config_field)))

    def count(self, training_input: TrainingInput) -> int:
        """The replica count a CUSTOM job asks for: 1 for the master, 0 when a count is unset."""
        if self.count_field is None:
            return 1
        return int(getattr(training_input, to_snake(self.count_field)) or 0)


# In the service's order, which is also the order of Vertex AI's worker pools.
ROLES = (
    Role("master", "masterType", "masterConfig", None),
    Role("worker", "workerType", "workerConfig", "workerCount"),
    Role("parameter_server", "parameterServerType", "parameterServerConfig", "parameterServerCount"),
    Role("evaluator", "evaluatorType", "evaluatorConfig", "evaluatorCount"),
)
ROLE = {role.name: role for role in ROLES}


class HyperparameterSpec(ApiModel):
    goal: Goal | None = None
    params: list[ParameterSpec] | None = None
    max_trials: int | None = None
    max_parallel_trials: int | None = None
    max_failed_trials: int | None = None
    hyperparameter_metric_tag: str | None = None
    resume_previous_job_id: str | None = None
    enable_trial_early_stopping: bool | None = None
    algorithm: Algorithm | None = None
    # aiptrain's own, not ml v1's: a trial's final metric is its best report rather than its
    # last (a Vertex AI study's measurementSelectionType BEST_MEASUREMENT).
    best_measurement: bool | None = None


class TrainingInput(ApiModel):
    scale_tier: ScaleTier | None = None
    master_type: str | None = None
    master_config: ReplicaConfig | None = None
    worker_type: str | None = None
    worker_config: ReplicaConfig | None = None
    parameter_server_type: str | None = None
    parameter_server_config: ReplicaConfig | None = None
    evaluator_type: str | None = None
    evaluator_config: ReplicaConfig | None = None
    worker_count: Int64 | None = None
    parameter_server_count: Int64 | None = None
    evaluator_count: Int64 | None = None
    package_uris: list[str] | None = None
    python_module: str | None = None
    args: list[str] | None = None
    hyperparameters: HyperparameterSpec | None = None
    region: str | None = None
    job_dir: str | None = None
    runtime_version: str | None = None
    python_version: str | None = None
    network: str | None = None
    service_account: str | None = None
    encryption_config: EncryptionConfig | None = None
    scheduling: Scheduling | None = None
    use_chief_in_tf_config: bool | None = None
    enable_web_access: bool | None = None


class FinalMetric(ApiModel):
    training_step: Int64 | None = None
    objective_value: float | None = None


class HyperparameterOutput(ApiModel):
    trial_id: str | None = None
    hyperparameters: dict[str, str] | None = None
    final_metric: FinalMetric | None = None
    all_metrics: list[FinalMetric] | None = None
    start_time: str | None = None
    end_time: str | None = None
    state: JobState | None = None
    is_trial_stopped_early: bool | None = None
    web_access_uris: dict[str, str] | None = None


class TrainingOutput(ApiModel):
    completed_trial_count: Int64 | None = None
    consumed_m_l_units: float | None = None
    trials: list[HyperparameterOutput] | None = None
    hyperparameter_metric_tag: str | None = None
    is_hyperparameter_tuning_job: bool | None = None
    is_built_in_algorithm_job: bool | None = None
    web_access_uris: dict[str, str] | None = None


class Job(ApiModel):
    job_id: str | None = None
    labels: dict[str, str] | None = None
    training_input: TrainingInput | None = None
    training_output: TrainingOutput | None = None
    create_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    state: JobState | None = None
    error_message: str | None = None
    etag: str | None = None
    job_position: Int64 | None = None


# The Job fields only the service sets. A create request may carry them (a re-sent `describe`):
# clients leave them out and servers ignore them.
OUTPUT_ONLY_FIELDS = ("createTime", "startTime", "endTime", "state", "errorMessage", "trainingOutput",
                      "predictionOutput", "jobPosition")


def without_output_fields(body: Mapping[str, Any], *also: str) -> dict[str, Any]:
    """`body` (a Job in REST form) without its output-only fields, nor the fields in `also`."""
    return {key: value for key, value in body.items() if key not in OUTPUT_ONLY_FIELDS and key not in also}


def as_new_job(job: Job) -> Job:
    """A copy of `job` as a create request carries it: no output-only fields, no etag."""
    aliases = field_aliases(Job)
    cleared = {aliases[name]: None for name in (*OUTPUT_ONLY_FIELDS, "etag") if name in aliases}
    return job.model_copy(deep=True, update=cleared)


# `consumedMLUnits` does not follow the generic camelCase rule; give it its REST spelling.
TrainingOutput.model_fields["consumed_m_l_units"].alias = "consumedMLUnits"
TrainingOutput.model_rebuild(force=True)
Job.model_rebuild(force=True)


def field_aliases(model: type[BaseModel]) -> dict[str, str]:
    """REST name -> Python attribute name of a model's fields."""
    return {(info.alias or name): name for name, info in model.model_fields.items()}


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that holds the field at `loc` (a pydantic error location of REST names)."""
    current: type[BaseModel] = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        attr = field_aliases(current).get(part)
        if attr is None:
            return None
        annotation = current.model_fields[attr].annotation
        nested = _first_model_in(annotation)
        if nested is None:
            return None
        current = nested
    return current


def _first_model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model_in(arg)
        if found is not None:
            return found
    return None


def _dotted(loc: tuple[int | str, ...], prefix: str) -> str:
    text = prefix
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text = f"{text}.{part}" if text else str(part)
    return text


def problems_from_validation(
    error: ValidationError, model: type[BaseModel], prefix: str = ""
) -> list[Problem]:
    """Turn pydantic's errors into Problems with REST paths and 'did you mean' hints."""
    problems: list[Problem] = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = _dotted(loc, prefix)
        kind = item["type"]
        if kind == "extra_forbidden":
            owner = _model_at(model, loc)
            known = sorted(field_aliases(owner)) if owner else []
            name = str(loc[-1])
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`?" if close else "remove it"
            if not close and known:
                hint = "remove it; known fields here: " + ", ".join(known)
            problems.append(Problem(path, "unknown field", hint))
        elif kind == "enum":
            expected = item.get("ctx", {}).get("expected", "")
            value = item.get("input")
            choices = [c.strip().strip("'") for c in expected.replace(" or ", ",").split(",") if c.strip()]
            close = difflib.get_close_matches(str(value).upper().replace("-", "_"), choices, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"use one of: {', '.join(choices)}"
            problems.append(Problem(path, f"{value!r} is not a valid value", hint))
        else:
            message = item["msg"].removeprefix("Value error, ")
            field = next((str(part) for part in reversed(loc) if isinstance(part, str)), "field")
            problems.append(Problem(path, message[0].lower() + message[1:], _value_hint(kind, field, message)))
    return problems


# What to write instead, by pydantic error type; {field} is the REST name of the field.
_VALUE_HINTS = {
    "int_parsing": "write a whole number, e.g. {field}: 2",
    "int_from_float": "write a whole number, e.g. {field}: 2",
    "int_type": "write a whole number, e.g. {field}: 2",
    "float_parsing": "write a number, e.g. {field}: 0.1",
    "float_type": "write a number, e.g. {field}: 0.1",
    "finite_number": "write a finite number (not NaN or infinity), e.g. {field}: 0.1",
    "bool_parsing": "write true or false",
    "bool_type": "write true or false",
    "string_type": "write it as text, in quotes if it looks like a number",
    "list_type": "write a list, e.g. {field}: [a, b]",
    "dict_type": "write a mapping, e.g. {field}: {{key: value}}",
    "model_type": "write a mapping of its fields, e.g. {field}: {{...}}",
}


def _value_hint(kind: str, field: str, message: str) -> str:
    if kind == "value_error" and "integer" in message:  # our int64 parser's ValueError
        kind = "int_parsing"
    template = _VALUE_HINTS.get(kind, "correct the value or remove {field}")
    return template.format(field=field)


def parse_job(data: Any, *, source: str = "") -> Job:
    """Build a Job from REST-shaped data, reporting every problem at once.

    `source` prefixes paths in messages (for example the --config file name).
    """
    job, problems = parse_job_lenient(data, source=source)
    if problems or job is None:
        raise ValidationFailed(problems)
    return job


def parse_job_lenient(data: Any, *, source: str = "") -> tuple[Job | None, list[Problem]]:
    """Like `parse_job`, but unknown fields are reported and dropped instead of stopping the parse.

    A typo such as `scaleTeir` would otherwise hide every cross-field problem of the job until it
    is fixed; dropping the unknown keys lets the caller validate the rest in the same run. The Job
    is None only when something other than unknown fields (a wrong type, a bad enum) is wrong,
    because then there is no sound structure left to check.
    """
    if not isinstance(data, Mapping):
        where = source or "job"
        return None, [Problem(where, f"expected a mapping of Job fields, got {type(data).__name__}",
                              "the file must hold a Job such as `trainingInput: {scaleTier: BASIC}`")]
    body = copy.deepcopy(dict(data))
    try:
        return Job.model_validate(body), []
    except ValidationError as error:
        problems = _with_source(problems_from_validation(error, Job), source)
        unknown = [tuple(item["loc"]) for item in error.errors() if item["type"] == "extra_forbidden"]
        if len(unknown) < error.error_count():
            return None, problems  # a type or value error: no Job to validate further
    for loc in unknown:
        _drop(body, loc)
    try:
        return Job.model_validate(body), problems
    except ValidationError as error:  # not expected: dropping keys cannot create new errors
        return None, problems + _with_source(problems_from_validation(error, Job), source)


def _with_source(problems: list[Problem], source: str) -> list[Problem]:
    if not source:
        return problems
    return [Problem(f"{source}: {p.path}", p.message, p.hint) for p in problems]


def _drop(body: Any, loc: tuple[int | str, ...]) -> None:
    """Delete the key at `loc` (dict keys and list indexes) from nested REST data."""
    for part in loc[:-1]:
        body = body[part]
    if isinstance(body, dict):
        body.pop(loc[-1], None)


def job_from_api(data: Mapping[str, Any]) -> Job:
    """Parse a Job received from a backend; errors here are bugs or incompatible servers."""
    return Job.model_validate(dict(data))


def job_resource_name(project: str, job_id: str) -> str:
    """`projects/PROJECT/jobs/JOB_ID`: the job's ml v1 resource name (the REST calls' `name`)."""
    return f"projects/{project}/jobs/{job_id}"
