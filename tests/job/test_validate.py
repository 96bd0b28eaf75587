"""Cross-field validation: each rule fires on its case and stays silent on a good job."""

from __future__ import annotations

from typing import Any

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import parse_job
from aiptrain._job.validate import bucket_name_problem, suggest_job_id, validate_job

CATALOG = load_catalog()


def job(**training_input: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"region": "us-central1", "pythonModule": "trainer.task",
                            "packageUris": ["gs://my-bucket/t.tar.gz"]}
    base.update(training_input)
    return {"jobId": "ok_job", "trainingInput": base}


def paths(data: dict[str, Any]) -> set[str]:
    return {p.path for p in validate_job(parse_job(data), CATALOG)}


def test_good_jobs_have_no_problems() -> None:
    assert paths(job()) == set()
    # tensorflow-cloud's body for a CPU machine: a lower-case tier and a zero-count accelerator.
    no_gpu = {"acceleratorConfig": {"count": "0", "type": "ACCELERATOR_TYPE_UNSPECIFIED"}}
    assert paths(job(scaleTier="custom", masterType="n1-standard-4", masterConfig=no_gpu)) == set()
    assert paths(job(scaleTier="STANDARD_1", runtimeVersion="2.11", pythonVersion="3.7")) == set()
    assert paths(job(scaleTier="CUSTOM", masterType="n1-standard-8", workerType="n1-standard-8",
                     workerCount="2", masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4",
                                                                          "count": "1"}})) == set()
    assert paths(job(scaleTier="CUSTOM", masterType="complex_model_m_gpu", workerType="standard",
                     workerCount="1")) == set()


@pytest.mark.parametrize(("job_id", "suggestion"), [
    ("my-job-1", "my_job_1"), ("1job", "job_1job"), ("a b", "a_b"), ("x" * 200, "x" * 128),
])
def test_job_id_suggestions_are_valid(job_id: str, suggestion: str) -> None:
    assert suggest_job_id(job_id, 128) == suggestion
    data = job()
    data["jobId"] = job_id
    problems = validate_job(parse_job(data), CATALOG)
    assert [p.path for p in problems] == ["jobId"]
    data["jobId"] = suggestion
    assert validate_job(parse_job(data), CATALOG) == []


@pytest.mark.parametrize(("bucket", "fragment"), [
    ("ab", "3 to 63"), ("Upper", "lowercase"), ("-dash", "start and end"), ("192.168.1.1", "IP"),
    ("a" * 64, "3 to 63"), ("goog-bucket", "'goog'"), ("goog", "'goog'"), ("my-google-bucket", "'google'"),
    ("my-g00gle-data", "'google'"), ("gogle-x", "'google'"), ("x.google.com", "'google'"),
])
def test_bucket_rules(bucket: str, fragment: str) -> None:
    problem = bucket_name_problem(bucket)
    assert problem is not None and fragment in problem


def test_bucket_rules_accept_valid_names() -> None:
    for name in ("my-bucket", "a.b.c", "x_y-1", "a" * 63, "my-goog-bucket", "gogo-lea"):
        assert bucket_name_problem(name) is None


@pytest.mark.parametrize(("training_input", "expected"), [
    ({"scaleTier": "CUSTOM"}, {"trainingInput.masterType"}),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerCount": "2"}, {"trainingInput.workerType"}),
    ({"scaleTier": "BASIC", "masterType": "n1-standard-4"}, {"trainingInput.masterType"}),
    ({"scaleTier": "STANDARD_1", "workerCount": "3"}, {"trainingInput.workerCount"}),
    ({"scaleTier": "CUSTOM", "masterType": "standard", "workerType": "n1-standard-4", "workerCount": "1"},
     {"trainingInput"}),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standrd-4"}, {"trainingInput.masterType"}),
    ({"scaleTier": "CUSTOM", "masterType": "standard",
      "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}}},
     {"trainingInput.masterConfig.acceleratorConfig"}),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
      "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "3"}}},
     {"trainingInput.masterConfig.acceleratorConfig.count"}),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-32",
      "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": "1"}}},
     {"trainingInput.masterConfig.acceleratorConfig"}),
    ({"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "region": "europe-west3",
      "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}}},
     {"trainingInput.masterConfig.acceleratorConfig"}),
    ({"scaleTier": "BASIC_GPU", "region": "europe-west3"}, {"trainingInput.scaleTier"}),
    ({"runtimeVersion": "2.11", "pythonVersion": "2.7"}, {"trainingInput.pythonVersion"}),
    ({"runtimeVersion": "9.9"}, {"trainingInput.runtimeVersion"}),
    ({"runtimeVersion": "2.11", "masterConfig": {"imageUri": "gcr.io/p/i"}}, {"trainingInput.runtimeVersion"}),
    ({"args": ["--x"], "masterConfig": {"imageUri": "gcr.io/p/i", "containerArgs": ["--y"]}},
     {"trainingInput.masterConfig"}),
    ({"packageUris": [f"gs://my-bucket/p{i}.tar.gz" for i in range(101)]}, {"trainingInput.packageUris"}),
    ({"packageUris": ["gs://b/x.tar.gz"]}, {"trainingInput.packageUris[0]"}),
    ({"pythonModule": None}, {"trainingInput.pythonModule"}),
    ({"region": "mars-north1"}, {"trainingInput.region"}),
    ({"jobDir": "/tmp/out"}, {"trainingInput.jobDir"}),
    ({"scheduling": {"maxWaitTime": "60s"}}, {"trainingInput.scheduling.maxWaitTime"}),
    ({"scheduling": {"priority": 5000}}, {"trainingInput.scheduling.priority"}),
    ({"scheduling": {"maxRunningTime": "2h"}}, {"trainingInput.scheduling.maxRunningTime"}),
    ({"serviceAccount": "nobody"}, {"trainingInput.serviceAccount"}),
])
def test_rules(training_input: dict[str, Any], expected: set[str]) -> None:
    assert paths(job(**training_input)) == expected


def hp(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 2,
                            "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.01, "maxValue": 0.1}]}
    base.update(spec)
    return job(hyperparameters=base)


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, set()),
    ({"maxParallelTrials": 5}, {"trainingInput.hyperparameters.maxParallelTrials"}),
    ({"algorithm": "GRID_SEARCH"}, {"trainingInput.hyperparameters.params[0].type"}),
    ({"params": [{"parameterName": "d", "type": "DISCRETE", "discreteValues": [1, 3, 2]}]},
     {"trainingInput.hyperparameters.params[0].discreteValues"}),
    ({"params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0, "maxValue": 1,
                  "scaleType": "UNIT_LOG_SCALE"}]}, {"trainingInput.hyperparameters.params[0].minValue"}),
    ({"params": [{"parameterName": "a", "type": "INTEGER", "minValue": 1, "maxValue": 4},
                 {"parameterName": "a", "type": "INTEGER", "minValue": 1, "maxValue": 4}]},
     {"trainingInput.hyperparameters.params[1].parameterName"}),
    ({"params": [{"parameterName": "c", "type": "CATEGORICAL"}]},
     {"trainingInput.hyperparameters.params[0].categoricalValues"}),
    ({"params": []}, {"trainingInput.hyperparameters.params"}),
    ({"params": [{"parameterName": "n", "type": "INTEGER", "minValue": 1.5, "maxValue": 4}]},
     {"trainingInput.hyperparameters.params[0]"}),
])
def test_hyperparameter_rules(spec: dict[str, Any], expected: set[str]) -> None:
    assert paths(hp(**spec)) == expected


def test_every_problem_is_reported_at_once() -> None:
    data = job(scaleTier="CUSTOM", region="nowhere", runtimeVersion="9.9", jobDir="local/dir")
    data["jobId"] = "bad-id"
    data["labels"] = {"Team": "X"}
    found = paths(data)
    assert {"jobId", "labels.Team", "trainingInput.region", "trainingInput.masterType",
            "trainingInput.runtimeVersion", "trainingInput.jobDir"} <= found
    hints = {p.path: p.hint for p in validate_job(parse_job(data), CATALOG)}
    assert hints["jobId"] == "use bad_id"
    master_hint = hints["trainingInput.masterType"]
    assert master_hint is not None and "--master-machine-type" in master_hint


def _t4(count: str) -> dict[str, Any]:
    return {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": count}}


@pytest.mark.parametrize(("data", "path", "fragment"), [
    (job(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=_t4("3")),
     "trainingInput.masterConfig.acceleratorConfig.count", "use count 4"),
    (job(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=_t4("9")),
     "trainingInput.masterConfig.acceleratorConfig.count", "use count 4"),
    (job(scheduling={"priority": 5000}), "trainingInput.scheduling.priority", "priority: 1000"),
    (job(scaleTier="CUSTOM", masterType="bogus"), "trainingInput.masterType", "n1-standard-4"),
    (job(scaleTier="CUSTOM", masterType="n1-standrd-4"), "trainingInput.masterType", "did you mean n1-standard-4?"),
    (hp(params=[{"parameterName": "d", "type": "DISCRETE", "discreteValues": [1, 3, 2, 3]}]),
     "trainingInput.hyperparameters.params[0].discreteValues", "[1, 2, 3]"),
    (hp(params=[{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.01}]),
     "trainingInput.hyperparameters.params[0].minValue", "minValue: 0.01, maxValue: 0.1"),
    (hp(params=[{"parameterName": "n", "type": "INTEGER", "minValue": 1.5, "maxValue": 4.5}]),
     "trainingInput.hyperparameters.params[0]", "minValue: 2, maxValue: 4"),
])
def test_hints_name_a_concrete_fix(data: dict[str, Any], path: str, fragment: str) -> None:
    hints = {p.path: p.hint or "" for p in validate_job(parse_job(data), CATALOG)}
    assert fragment in hints[path]


BAD_JOBS = [
    job(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=_t4("3"), workerCount="-1"),
    job(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig={"acceleratorConfig": {"count": "1"}}),
    job(scaleTier="CUSTOM", masterType="n1-standard-4", masterConfig=_t4("-1")),
    job(scaleTier="CUSTOM", masterType="bogus", workerCount="2", parameterServerCount="1"),
    job(scaleTier="CUSTOM", masterType="standard", masterConfig=_t4("1")),
    job(scheduling={"priority": 5000, "maxWaitTime": "1s", "maxRunningTime": "2h"}),
    job(pythonVersion="9.9"),
    job(pythonVersion="3.7"),
    job(runtimeVersion="2.11", pythonVersion="2.7"),
    {"jobId": "x", "labels": {f"k{i}": "v" for i in range(65)} | {"Bad": "V"}, "trainingInput": job()["trainingInput"]},
    {"jobId": "x"},
    hp(params=[]),
    hp(maxTrials=0, maxParallelTrials=0, maxFailedTrials=-1, resumePreviousJobId="1-bad"),
    hp(maxParallelTrials=9),
    hp(algorithm="GRID_SEARCH"),
    hp(params=[{"type": "DOUBLE"}, {"parameterName": "a"}]),
    hp(params=[{"parameterName": "a", "type": "INTEGER", "minValue": 2.5, "maxValue": 2.5},
               {"parameterName": "a", "type": "DOUBLE", "minValue": 0, "maxValue": 1, "scaleType": "UNIT_LOG_SCALE"}]),
    hp(params=[{"parameterName": "c", "type": "CATEGORICAL", "categoricalValues": ["x", "x"], "minValue": 1,
                "scaleType": "UNIT_LINEAR_SCALE"},
               {"parameterName": "e", "type": "CATEGORICAL"},
               {"parameterName": "d", "type": "DISCRETE", "discreteValues": [0, 2, 1], "scaleType": "UNIT_LOG_SCALE"},
               {"parameterName": "f", "type": "DISCRETE"},
               {"parameterName": "g", "type": "DISCRETE", "discreteValues": list(range(1001))}]),
]


@pytest.mark.parametrize("data", BAD_JOBS)
def test_every_validation_problem_has_a_hint(data: dict[str, Any]) -> None:
    problems = validate_job(parse_job(data), CATALOG)
    assert problems
    assert [p for p in problems if not (p.hint or "").strip()] == []


@pytest.mark.parametrize(("uri", "suggestion"), [
    ("gs://goog-bucket/x", "gs://my-goog-bucket"),
    ("gs://my-google-bucket/x", "gs://my-gcp-bucket"),
    ("gs://g00gle-data/x", "gs://gcp-data"),
])
def test_reserved_bucket_names_get_a_rename(uri: str, suggestion: str) -> None:
    (problem,) = validate_job(parse_job(job(jobDir=uri)), CATALOG)
    assert problem.path == "trainingInput.jobDir"
    assert problem.hint is not None and suggestion in problem.hint
    assert bucket_name_problem(suggestion.removeprefix("gs://")) is None


@pytest.mark.parametrize("image", [
    "--help", "-v", "Trainer", "gcr.io/p/My Image", "gcr.io/p/i:", "gcr.io/p/i;rm -rf /", "gcr.io//i", "i@sha256:xyz",
    "/abs/path", "a" * 256,
])
def test_an_image_uri_that_is_not_a_reference_is_refused_naming_the_field(image: str) -> None:
    problems = validate_job(parse_job(job(masterConfig={"imageUri": image}, pythonModule=None, packageUris=None)),
                            CATALOG)
    assert [p.path for p in problems] == ["trainingInput.masterConfig.imageUri"]
    assert "is not an image reference" in problems[0].message and "REPOSITORY[:TAG]" in (problems[0].hint or "")
    worker = job(scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4", workerCount="1",
                 masterConfig={"imageUri": "gcr.io/p/i"}, workerConfig={"imageUri": image},
                 pythonModule=None, packageUris=None)
    assert paths(worker) == {"trainingInput.workerConfig.imageUri"}


@pytest.mark.parametrize("image", [
    "busybox", "gcr.io/p/i", "localhost:5000/team/trainer:v1.2", "aiptrain-tests/shell:0a1b2c",
    "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest", "my_org/my__image-x",
    "gcr.io/p/i@sha256:" + "0" * 64, "gcr.io/p/i:tag@sha256:" + "a" * 64,
])
def test_image_references_pass(image: str) -> None:
    assert paths(job(masterConfig={"imageUri": image}, pythonModule=None, packageUris=None)) == set()


def test_python_2_7_on_a_runtime_that_never_had_it_is_refused_in_the_services_words() -> None:
    [problem] = validate_job(parse_job(job(runtimeVersion="2.1", pythonVersion="2.7")), CATALOG)
    assert problem.path == "trainingInput.pythonVersion"
    assert problem.message == ("runtime 2.1 does not support Python 2.7; AI Platform Training refused such a job: "
                               "\"The specified runtime version '2.1' with the Python version '2.7' is not supported "
                               "or is deprecated.\"")
    assert problem.hint == "use --python-version 3.7, or a runtime version that had Python 2.7 (1.0 to 1.15)"
    assert validate_job(parse_job(job(runtimeVersion="1.15", pythonVersion="2.7")), CATALOG) == []
