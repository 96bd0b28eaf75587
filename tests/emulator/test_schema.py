"""The request validator against the real discovery documents shipped with googleapiclient."""

from __future__ import annotations

from typing import Any

import pytest

from aiptrain._emulator.discovery import discovery_document
from aiptrain._emulator.schema import SchemaValidator, Violation


@pytest.fixture(scope="module")
def ml() -> SchemaValidator:
    return SchemaValidator(discovery_document("ml", "v1"))


@pytest.fixture(scope="module")
def aiplatform() -> SchemaValidator:
    return SchemaValidator(discovery_document("aiplatform", "v1"))


def check(validator: SchemaValidator, body: Any, schema: str = "GoogleCloudMlV1__Job",
          root: str = "job") -> tuple[Any, list[Violation]]:
    return validator.validate(body, schema, root)


def test_a_valid_job_passes_and_int64_becomes_a_string(ml: SchemaValidator) -> None:
    cleaned, violations = check(ml, {"jobId": "j", "labels": {"a": "b"}, "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": 2, "parameterServerCount": "1",
        "packageUris": ["gs://b/p.tar.gz"], "scheduling": {"maxRunningTime": "7200s", "priority": 3},
        "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}}}})
    assert violations == []
    assert cleaned["trainingInput"]["workerCount"] == "2"
    assert cleaned["trainingInput"]["parameterServerCount"] == "1"
    assert cleaned["trainingInput"]["scheduling"]["priority"] == 3


def test_unknown_field_at_the_top_and_nested(ml: SchemaValidator) -> None:
    _, violations = check(ml, {"jobId": "j", "jobIdd": "x", "trainingInput": {"scaleTeir": "BASIC"}})
    assert violations == [
        Violation("job", 'Invalid JSON payload received. Unknown name "jobIdd" at \'job\': Cannot find field.'),
        Violation("job.training_input",
                  'Invalid JSON payload received. Unknown name "scaleTeir" at \'job.training_input\': '
                  "Cannot find field."),
    ]


def test_bad_enum_names_the_field_and_the_choices(ml: SchemaValidator) -> None:
    _, violations = check(ml, {"trainingInput": {"scaleTier": "basik"}})
    assert [v.field for v in violations] == ["job.training_input.scale_tier"]
    assert violations[0].description.startswith(
        "Invalid value at 'job.training_input.scale_tier' (TYPE_ENUM), \"basik\"")
    assert "BASIC_GPU" in violations[0].description


def test_enum_names_in_any_case_are_kept_as_the_document_spells_them(ml: SchemaValidator) -> None:
    # tensorflow-cloud sends exactly this, and the service's JSON front end took it.
    cleaned, violations = check(ml, {"trainingInput": {
        "scaleTier": "custom", "masterType": "n1-standard-4",
        "masterConfig": {"acceleratorConfig": {"count": "0", "type": "accelerator_type_unspecified"}},
        "hyperparameters": {"goal": "Maximize"}}})
    assert violations == []
    assert cleaned["trainingInput"]["scaleTier"] == "CUSTOM"
    assert cleaned["trainingInput"]["masterConfig"]["acceleratorConfig"]["type"] == "ACCELERATOR_TYPE_UNSPECIFIED"
    assert cleaned["trainingInput"]["hyperparameters"]["goal"] == "MAXIMIZE"


@pytest.mark.parametrize(("value", "ok"), [
    ("3", True), (3, True), ("-1", True), ("9223372036854775807", True), ("9223372036854775808", False),
    ("abc", False), ("1.5", False), (1.5, False), (2.0, True), (True, False), ([], False),
])
def test_int64(ml: SchemaValidator, value: Any, ok: bool) -> None:
    _, violations = check(ml, {"trainingInput": {"workerCount": value}})
    assert (violations == []) is ok
    if not ok:
        assert violations[0].field == "job.training_input.worker_count"
        assert "(TYPE_INT64)" in violations[0].description


def test_deeply_nested_paths_use_snake_case_and_indexes(ml: SchemaValidator) -> None:
    _, violations = check(ml, {"trainingInput": {
        "hyperparameters": {"params": [{"parameterName": "lr"}, {"type": "FLOAT", "minValue": "x"}]},
        "packageUris": ["ok", 7],
        "masterConfig": {"acceleratorConfig": {"count": "two"}}}})
    assert [v.field for v in violations] == [
        "job.training_input.hyperparameters.params[1].type",
        "job.training_input.hyperparameters.params[1].min_value",
        "job.training_input.package_uris[1]",
        "job.training_input.master_config.accelerator_config.count",
    ]


def test_snake_case_names_are_accepted_and_normalised(ml: SchemaValidator) -> None:
    cleaned, violations = check(ml, {"job_id": "j", "training_input": {"scale_tier": "BASIC"}})
    assert violations == []
    assert cleaned == {"jobId": "j", "trainingInput": {"scaleTier": "BASIC"}}


def test_types(ml: SchemaValidator) -> None:
    _, violations = check(ml, {"jobId": 5, "labels": {"k": 1}, "trainingInput": {
        "enableWebAccess": "true", "scheduling": {"maxRunningTime": "2h"}}, "etag": "not base64!"})
    assert sorted(v.field for v in violations) == sorted([
        "job.job_id", "job.labels[k]", "job.training_input.enable_web_access",
        "job.training_input.scheduling.max_running_time", "job.etag"])


def test_nulls_are_dropped(ml: SchemaValidator) -> None:
    cleaned, violations = check(ml, {"jobId": "j", "labels": None})
    assert violations == [] and cleaned == {"jobId": "j"}


def test_not_an_object(ml: SchemaValidator) -> None:
    _, violations = check(ml, {"trainingInput": ["BASIC"]})
    assert [v.field for v in violations] == ["job.training_input"]


def test_custom_job(aiplatform: SchemaValidator) -> None:
    body: dict[str, Any] = {"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1},
         "replicaCount": "1", "pythonPackageSpec": {"executorImageUri": "i", "packageUris": ["gs://b/p"],
                                                    "pythonModule": "m"}},
        {}], "scheduling": {"timeout": "60s"}}}
    cleaned, violations = check(aiplatform, body, "GoogleCloudAiplatformV1CustomJob", "custom_job")
    assert violations == [] and cleaned == body
    lower = {**body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"], "acceleratorType": "nvidia_l4"}
    cleaned, violations = check(aiplatform, {"jobSpec": {"workerPoolSpecs": [{"machineSpec": lower}]}},
                                "GoogleCloudAiplatformV1CustomJob", "custom_job")
    assert violations == []
    assert cleaned["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "NVIDIA_L4"
    body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_TESLA_K81"
    body["jobSpec"]["workerPoolSpecs"][1] = {"replicas": 2}
    _, violations = check(aiplatform, body, "GoogleCloudAiplatformV1CustomJob", "custom_job")
    assert [v.field for v in violations] == [
        "custom_job.job_spec.worker_pool_specs[0].machine_spec.accelerator_type",
        "custom_job.job_spec.worker_pool_specs[1]",
    ]


def test_logging_request_at_the_root() -> None:
    validator = SchemaValidator(discovery_document("logging", "v2"))
    _, violations = validator.validate({"filter": "x", "pageSize": "ten", "order": "asc"}, "ListLogEntriesRequest",
                                       "")
    assert violations == [
        Violation("page_size", "Invalid value at 'page_size' (TYPE_INT32), \"ten\""),
        Violation("", 'Invalid JSON payload received. Unknown name "order": Cannot find field.'),
    ]
