"""Properties of everything that parses outside input: whatever comes in, the answer is a value or
the component's own refusal (Problem, ValidationFailed, FilterError, ApiError), never a crash,
and nothing accepted holds a value JSON cannot carry."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiptrain._backends.local.filters import compile_filter
from aiptrain._emulator.discovery import discovery_document
from aiptrain._emulator.errors import ApiError
from aiptrain._emulator.limits import parse_json_body
from aiptrain._emulator.query import FilterError, parse_filter
from aiptrain._emulator.schema import SchemaValidator
from aiptrain._job.catalog import load_catalog
from aiptrain._job.filters import parse_filter as parse_job_filter
from aiptrain._job.project_id import project_id_problem
from aiptrain._job.spec import parse_job_lenient
from aiptrain._job.validate import bucket_name_problem, check_gs_uri, check_job_id, validate_job
from aiptrain._submit.submission import load_config
from aiptrain.errors import UsageError, ValidationFailed

JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")

# JSON-like values, floats included with NaN and infinities (what YAML and Python's json produce).
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=30)
# Job-shaped documents: real field names at the top, anything below them.
training_keys = st.sampled_from(["scaleTier", "masterType", "workerCount", "region", "args", "packageUris",
                                 "pythonModule", "jobDir", "hyperparameters", "runtimeVersion", "scaleTeir"])
hyperparameter_values = st.fixed_dictionaries({
    "goal": st.sampled_from(["MAXIMIZE", "MINIMIZE", "bogus"]),
    "maxTrials": st.integers(-3, 10) | st.floats(),
    "params": st.lists(st.fixed_dictionaries({
        "parameterName": st.text(max_size=8),
        "type": st.sampled_from(["DOUBLE", "INTEGER", "DISCRETE", "CATEGORICAL"]),
        "minValue": st.floats() | st.integers(),
        "maxValue": st.floats() | st.integers(),
    }), max_size=3),
})
jobs = st.fixed_dictionaries({
    "jobId": st.text(max_size=20) | st.from_regex(JOB_ID, fullmatch=True),
    "trainingInput": st.dictionaries(training_keys, json_values | hyperparameter_values, max_size=6),
})


def _strict_json(value: Any) -> str:
    return json.dumps(value, allow_nan=False)


@given(st.text(max_size=140))
def test_job_ids_are_valid_exactly_when_they_fully_match_the_rule(job_id: str) -> None:
    problems = check_job_id(job_id, load_catalog())
    assert (not problems) == bool(JOB_ID.fullmatch(job_id))


@given(st.text(max_size=40) | st.from_regex(PROJECT, fullmatch=True))
def test_project_ids_follow_the_service_rule(project: str) -> None:
    problem = project_id_problem(project)
    if problem is None:
        name = project.rpartition(":")[2]
        assert PROJECT.fullmatch(name) or project.isdigit()
        assert "\n" not in project


@given(st.text(max_size=80))
def test_bucket_names_and_gs_uris_never_crash(text: str) -> None:
    bucket_name_problem(text)
    for uri in (text, f"gs://{text}", f"gs://my-bucket/{text}"):
        problems = check_gs_uri("trainingInput.jobDir", uri)
        if not problems and uri.startswith("gs://my-bucket/"):
            segments = text.rstrip("/").split("/") if text.rstrip("/") else []
            assert not {"", ".", ".."} & set(segments)
            assert not {"\r", "\n", "\0"} & set(text)


@given(jobs | json_values)
def test_any_document_parses_to_a_job_or_problems_and_validates_without_crashing(document: Any) -> None:
    job, problems = parse_job_lenient(document)
    if job is not None:
        _strict_json(job.to_api())  # nothing accepted holds NaN or an infinity
        validate_job(job, load_catalog())
    else:
        assert problems


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_config_files_load_or_are_refused_as_validation_failures(tmp_path_factory: Any, raw: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("config")) / "config.yaml"
    path.write_bytes(raw)
    try:
        data = load_config(path)
    except ValidationFailed as refused:
        assert refused.problems
        return
    assert isinstance(data, dict)


words = st.sampled_from(["jobId", "state", "labels.team", "createTime", "AND", "OR", "NOT", "-", "(", ")",
                         ":", "=", "!=", "<", ">=", '"a b"', "x*", "SUCCEEDED", "2024-01-01T00:00:00Z",
                         "severity", "ERROR", "timestamp", "'q'", "\\", '"'])
filters = st.lists(words, max_size=20).map(" ".join) | st.text(max_size=60)


@given(filters, json_values)
def test_logging_filters_parse_and_match_or_refuse(text: str, record: Any) -> None:
    try:
        parsed = parse_filter(text)
        parsed.matches(record if isinstance(record, dict) else {"jobId": record})
    except FilterError:
        pass


@given(filters, json_values)
def test_job_list_filters_parse_compile_and_match_or_refuse(text: str, record: Any) -> None:
    try:
        parsed = parse_job_filter(text)
    except UsageError as refused:
        assert refused.message.startswith("--filter: ")
        return
    compile_filter(parsed)
    parsed.matches(record if isinstance(record, dict) else {"jobId": record})


_ML = SchemaValidator(discovery_document("ml", "v1"))
_AIPLATFORM = SchemaValidator(discovery_document("aiplatform", "v1"))


@given(jobs | json_values)
def test_rest_schemas_accept_only_what_json_can_carry(body: Any) -> None:
    for validator, schema, root in ((_ML, "GoogleCloudMlV1__Job", "job"),
                                    (_AIPLATFORM, "GoogleCloudAiplatformV1CustomJob", "custom_job"),
                                    (_AIPLATFORM, "GoogleCloudAiplatformV1HyperparameterTuningJob",
                                     "hyperparameter_tuning_job")):
        cleaned, violations = validator.validate(body, schema, root)
        if not violations:
            _strict_json(cleaned)


@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_request_bodies_parse_or_are_refused_with_400(raw: bytes) -> None:
    try:
        value = parse_json_body(raw)
    except ApiError as error:
        assert error.http_status == 400
        return
    _strict_json(value)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_non_finite_numbers_never_pass_a_number_field(number: float) -> None:
    body = {"jobId": "j", "trainingInput": {"hyperparameters": {"params": [{"parameterName": "lr",
                                                                            "minValue": number}]}}}
    _, violations = _ML.validate(body, "GoogleCloudMlV1__Job", "job")
    assert bool(violations) == (not math.isfinite(number))
