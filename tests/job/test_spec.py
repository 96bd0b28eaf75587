"""The Job model: REST names, int64 as strings, unknown fields with paths and suggestions."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from aiptrain._job.spec import Job, JobState, job_resource_name, parse_job, parse_job_lenient
from aiptrain.errors import ValidationFailed

FULL_JOB = {
    "jobId": "census_1",
    "labels": {"team": "ml"},
    "trainingInput": {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-8",
        "masterConfig": {"acceleratorConfig": {"count": "2", "type": "NVIDIA_TESLA_T4"},
                         "diskConfig": {"bootDiskSizeGb": 200, "bootDiskType": "pd-standard"}},
        "workerType": "n1-standard-4",
        "workerCount": "3",
        "parameterServerType": "n1-highmem-8",
        "parameterServerCount": "1",
        "evaluatorType": "n1-standard-4",
        "evaluatorCount": "1",
        "packageUris": ["gs://bucket/trainer-0.1.tar.gz"],
        "pythonModule": "trainer.task",
        "args": ["--epochs", "3"],
        "hyperparameters": {
            "goal": "MAXIMIZE",
            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1,
                        "scaleType": "UNIT_LOG_SCALE"}],
            "maxTrials": 4,
            "maxParallelTrials": 2,
            "hyperparameterMetricTag": "accuracy",
            "algorithm": "RANDOM_SEARCH",
        },
        "region": "us-central1",
        "jobDir": "gs://bucket/jobs/census_1",
        "runtimeVersion": "2.11",
        "pythonVersion": "3.7",
        "scheduling": {"maxRunningTime": "7200s", "maxWaitTime": "3600s", "priority": 10},
        "encryptionConfig": {"kmsKeyName": "projects/p/locations/l/keyRings/k/cryptoKeys/n"},
        "useChiefInTfConfig": True,
        "enableWebAccess": False,
    },
    "trainingOutput": {"completedTrialCount": "2", "consumedMLUnits": 1.5, "isHyperparameterTuningJob": True,
                       "trials": [{"trialId": "1", "hyperparameters": {"lr": "0.01"},
                                   "finalMetric": {"trainingStep": "100", "objectiveValue": 0.9}}]},
    "state": "SUCCEEDED",
    "jobPosition": "0",
}


def test_json_round_trip_is_exact() -> None:
    job = parse_job(FULL_JOB)
    assert job.to_api() == FULL_JOB
    again = parse_job(json.loads(json.dumps(job.to_api())))
    assert again == job


def test_yaml_round_trip_is_exact() -> None:
    job = parse_job(FULL_JOB)
    text = yaml.safe_dump(job.to_api())
    assert parse_job(yaml.safe_load(text)).to_api() == FULL_JOB


def test_int64_accepts_numbers_and_writes_strings() -> None:
    job = parse_job({"jobId": "a", "trainingInput": {"workerCount": 3, "parameterServerCount": "2"}})
    body = job.to_api()["trainingInput"]
    assert body["workerCount"] == "3"
    assert body["parameterServerCount"] == "2"
    assert job.training_input is not None and job.training_input.worker_count == 3


def test_int64_rejects_fractions_and_words() -> None:
    with pytest.raises(ValidationFailed) as failed:
        parse_job({"jobId": "a", "trainingInput": {"workerCount": 2.5, "evaluatorCount": "many"}})
    paths = {p.path for p in failed.value.problems}
    assert paths == {"trainingInput.workerCount", "trainingInput.evaluatorCount"}


def test_unknown_field_names_full_path_and_suggestion() -> None:
    with pytest.raises(ValidationFailed) as failed:
        parse_job({"jobId": "a", "trainingInput": {"scaleTeir": "BASIC",
                                                    "masterConfig": {"acceleratorConfg": {}}}})
    problems = {p.path: p for p in failed.value.problems}
    assert problems["trainingInput.scaleTeir"].hint == "did you mean `scaleTier`?"
    assert problems["trainingInput.masterConfig.acceleratorConfg"].hint == "did you mean `acceleratorConfig`?"


def test_bad_enum_suggests_the_spelling() -> None:
    with pytest.raises(ValidationFailed) as failed:
        parse_job({"jobId": "a", "trainingInput": {"scaleTier": "basic-gpu"}})
    (problem,) = failed.value.problems
    assert problem.path == "trainingInput.scaleTier"
    assert problem.hint == "did you mean BASIC_GPU?"


def test_enum_names_in_any_case_are_stored_canonical() -> None:
    # tensorflow-cloud 0.1.16 sends `scaleTier: "custom"`; the service's JSON front end took it.
    job = parse_job({"jobId": "a", "trainingInput": {
        "scaleTier": "custom", "masterType": "n1-standard-4",
        "masterConfig": {"acceleratorConfig": {"type": "nvidia_tesla_t4", "count": "1"}},
        "hyperparameters": {"goal": "maximize", "algorithm": "Random_Search",
                            "params": [{"parameterName": "lr", "type": "double", "scaleType": "unit_log_scale"}]}}})
    ti = job.to_api()["trainingInput"]
    assert ti["scaleTier"] == "CUSTOM"
    assert ti["masterConfig"]["acceleratorConfig"]["type"] == "NVIDIA_TESLA_T4"
    assert ti["hyperparameters"]["goal"] == "MAXIMIZE"
    assert ti["hyperparameters"]["algorithm"] == "RANDOM_SEARCH"
    assert ti["hyperparameters"]["params"][0] == {"parameterName": "lr", "type": "DOUBLE",
                                                  "scaleType": "UNIT_LOG_SCALE"}


@pytest.mark.parametrize("config", [
    {"count": "0", "type": "ACCELERATOR_TYPE_UNSPECIFIED"},  # what tensorflow-cloud sends for a CPU machine
    {"count": 0, "type": "NVIDIA_TESLA_T4"},
])
def test_an_accelerator_count_of_zero_is_no_accelerator(config: dict[str, Any]) -> None:
    job = parse_job({"jobId": "a", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
        "masterConfig": {"acceleratorConfig": config, "imageUri": "trainer:1"},
        "workerConfig": {"acceleratorConfig": config}}})
    ti = job.to_api()["trainingInput"]
    assert ti["masterConfig"] == {"imageUri": "trainer:1"}
    assert ti["workerConfig"] == {}


def test_source_prefixes_paths() -> None:
    with pytest.raises(ValidationFailed) as failed:
        parse_job({"jobId": "a", "bogus": 1}, source="--config c.yaml")
    assert failed.value.problems[0].path == "--config c.yaml: bogus"


def test_non_mapping_is_refused() -> None:
    with pytest.raises(ValidationFailed):
        parse_job(["trainingInput"])


def test_terminal_states() -> None:
    assert {s for s in JobState if s.is_terminal} == {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
    assert Job(state=JobState.RUNNING).to_api() == {"state": "RUNNING"}


def test_lenient_parse_reports_unknown_fields_and_keeps_the_rest() -> None:
    data: dict[str, Any] = {"jobId": "a", "trainingInput": {"scaleTeir": "BASIC", "region": "mars",
                                            "hyperparameters": {"params": [{"parameterName": "lr", "typo": 1}]}}}
    job, problems = parse_job_lenient(data, source="--config c.yaml")
    assert {p.path for p in problems} == {"--config c.yaml: trainingInput.scaleTeir",
                                          "--config c.yaml: trainingInput.hyperparameters.params[0].typo"}
    assert job is not None and job.training_input is not None
    assert job.training_input.region == "mars"  # the rest is parsed, for cross-field validation
    assert job.training_input.hyperparameters is not None
    assert data["trainingInput"]["scaleTeir"] == "BASIC"  # the caller's data is not modified


def test_lenient_parse_gives_no_job_when_a_value_is_wrong() -> None:
    job, problems = parse_job_lenient({"jobId": "a", "trainingInput": {"scaleTeir": "BASIC", "workerCount": "two"}})
    assert job is None
    assert {p.path for p in problems} == {"trainingInput.scaleTeir", "trainingInput.workerCount"}


def test_every_parse_problem_has_a_hint() -> None:
    job, problems = parse_job_lenient({"jobId": 5, "labels": ["a"], "bogus": 1, "trainingInput": {
        "workerCount": "two", "args": "x", "useChiefInTfConfig": "maybe", "masterConfig": 3,
        "hyperparameters": {"maxTrials": "x", "params": [{"minValue": "a"}]}, "scheduling": {"priority": 1.5}}})
    assert job is None and len(problems) == 10
    assert [p for p in problems if not (p.hint or "").strip()] == []
    hints = {p.path: p.hint for p in problems}
    assert hints["trainingInput.workerCount"] == "write a whole number, e.g. workerCount: 2"


def test_a_job_s_resource_name_is_the_one_the_rest_calls_take() -> None:
    assert job_resource_name("my-project", "train_1") == "projects/my-project/jobs/train_1"
