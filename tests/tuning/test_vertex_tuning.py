"""Tuning jobs as Vertex AI HyperparameterTuningJobs: the body, the way back, and the emulator.

The body is compared with one written by hand from the aiplatform v1 discovery document (and
checked against that document's schema); the emulator serves hyperparameterTuningJobs over the
local engine, driven through aiptrain's vertex and mlv1 backends and a plain discovery client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.mlv1.backend import MlV1Backend
from aiptrain._backends.polling import AdaptivePoller
from aiptrain._backends.vertex.backend import VertexBackend
from aiptrain._backends.vertex.study import hyperparameter_tuning_job_to_job, job_to_hyperparameter_tuning_job
from aiptrain._backends.vertex.translate import vertex_problems
from aiptrain._cli.main import root
from aiptrain._emulator.discovery import discovery_document
from aiptrain._emulator.schema import SchemaValidator
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import Job, JobState, parse_job
from aiptrain._submit.follow import follow_job
from aiptrain._tuning.trials import objective_of
from aiptrain.errors import AlreadyExists, ValidationFailed
from tests.fixtures.emulator import Emulator, running_emulator
from tests.tuning.harness import trials_of, tuning_job
from tests.tuning.trainers.hptrainer.objective import objective

CPU = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-8:latest"
PACKAGE = "gs://bucket/packages/abc/trainer-0.1.tar.gz"
SPEC = {
    "goal": "MINIMIZE", "hyperparameterMetricTag": "loss", "maxTrials": 12, "maxParallelTrials": 3,
    "maxFailedTrials": 2, "enableTrialEarlyStopping": True, "algorithm": "RANDOM_SEARCH",
    "params": [
        {"parameterName": "learning-rate", "type": "DOUBLE", "minValue": 0.0001, "maxValue": 0.1,
         "scaleType": "UNIT_LOG_SCALE"},
        {"parameterName": "momentum", "type": "DOUBLE", "minValue": 0.5, "maxValue": 0.99,
         "scaleType": "UNIT_REVERSE_LOG_SCALE"},
        {"parameterName": "units", "type": "INTEGER", "minValue": 16, "maxValue": 256,
         "scaleType": "UNIT_LINEAR_SCALE"},
        {"parameterName": "batch-size", "type": "DISCRETE", "discreteValues": [32, 64, 128]},
        {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
    ],
}


def ml_job(hyperparameters: dict[str, Any]) -> Job:
    return parse_job({"jobId": "tune_me", "labels": {"team": "ml"}, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.8", "packageUris": [PACKAGE],
        "pythonModule": "trainer.task", "args": ["--epochs", "3"], "jobDir": "gs://b/out",
        "hyperparameters": hyperparameters}})


EXPECTED_BODY = {
    "displayName": "tune_me",
    "studySpec": {
        "metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
        "parameters": [
            {"parameterId": "learning-rate", "doubleValueSpec": {"minValue": 0.0001, "maxValue": 0.1},
             "scaleType": "UNIT_LOG_SCALE"},
            {"parameterId": "momentum", "doubleValueSpec": {"minValue": 0.5, "maxValue": 0.99},
             "scaleType": "UNIT_REVERSE_LOG_SCALE"},
            {"parameterId": "units", "integerValueSpec": {"minValue": "16", "maxValue": "256"},
             "scaleType": "UNIT_LINEAR_SCALE"},
            {"parameterId": "batch-size", "discreteValueSpec": {"values": [32.0, 64.0, 128.0]}},
            {"parameterId": "optimizer", "categoricalValueSpec": {"values": ["adam", "sgd"]}},
        ],
        "algorithm": "RANDOM_SEARCH",
        "measurementSelectionType": "LAST_MEASUREMENT",
        "medianAutomatedStoppingSpec": {},
    },
    "maxTrialCount": 12,
    "parallelTrialCount": 3,
    "maxFailedTrialCount": 2,
    "trialJobSpec": {
        "workerPoolSpecs": [{
            "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
            "pythonPackageSpec": {"executorImageUri": CPU, "packageUris": [PACKAGE], "pythonModule": "trainer.task",
                                  "args": ["--epochs", "3", "--job-dir=gs://b/out"]},
        }],
        "baseOutputDirectory": {"outputUriPrefix": "gs://b/out"},
    },
    "labels": {"team": "ml"},
}


def test_tuning_job_body_matches_the_hand_written_one() -> None:
    body = job_to_hyperparameter_tuning_job(ml_job(SPEC), load_catalog())
    assert body == EXPECTED_BODY
    validator = SchemaValidator(discovery_document("aiplatform", "v1"))
    _, violations = validator.validate(body, "GoogleCloudAiplatformV1HyperparameterTuningJob", "")
    assert violations == []


def test_defaults_are_spelled_out_and_resume_is_refused() -> None:
    minimal = {"params": [{"parameterName": "units", "type": "INTEGER", "minValue": 1, "maxValue": 4}]}
    body = job_to_hyperparameter_tuning_job(ml_job(minimal), load_catalog())
    assert body["studySpec"] == {
        "metrics": [{"metricId": "training/hptuning/metric", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "units", "integerValueSpec": {"minValue": "1", "maxValue": "4"}}],
        "measurementSelectionType": "LAST_MEASUREMENT",
    }
    assert (body["maxTrialCount"], body["parallelTrialCount"]) == (1, 1) and "maxFailedTrialCount" not in body
    resumed = ml_job({**minimal, "resumePreviousJobId": "older"})
    assert [p.path for p in vertex_problems(resumed, load_catalog())] == [
        "trainingInput.hyperparameters.resumePreviousJobId"]
    with pytest.raises(ValidationFailed):
        job_to_hyperparameter_tuning_job(resumed, load_catalog())


def test_a_tuning_job_reads_back_as_the_ml_v1_job_with_its_trials() -> None:
    def trial(trial_id: str, state: str, loss: float | None, units: float) -> dict[str, Any]:
        found: dict[str, Any] = {"id": trial_id, "state": state, "startTime": "2024-01-01T00:00:00Z",
                                 "parameters": [{"parameterId": "learning-rate", "value": 0.01},
                                                {"parameterId": "momentum", "value": 0.9},
                                                {"parameterId": "units", "value": units},
                                                {"parameterId": "batch-size", "value": 64},
                                                {"parameterId": "optimizer", "value": "sgd"}]}
        if loss is not None:
            found["finalMeasurement"] = {"stepCount": "100", "metrics": [{"metricId": "loss", "value": loss}]}
        return found

    served = {**EXPECTED_BODY, "name": "projects/p/locations/us-central1/hyperparameterTuningJobs/123",
              "state": "JOB_STATE_RUNNING", "createTime": "2024-01-01T00:00:00Z",
              "trials": [trial("1", "SUCCEEDED", 0.3, 64.0), trial("2", "SUCCEEDED", 0.2, 32.0),
                         trial("3", "INFEASIBLE", None, 16.0), trial("4", "ACTIVE", None, 128.0)]}
    job = hyperparameter_tuning_job_to_job(served, load_catalog())
    original = ml_job(SPEC)
    assert job.job_id == "tune_me" and job.state == JobState.RUNNING
    assert job.training_input is not None and original.training_input is not None
    assert job.training_input.hyperparameters == original.training_input.hyperparameters
    assert job.training_input.args == ["--epochs", "3"] and job.training_input.job_dir == "gs://b/out"
    trials = trials_of(job)
    assert [(t.trial_id, t.state) for t in trials] == [
        ("2", JobState.SUCCEEDED), ("1", JobState.SUCCEEDED), ("3", JobState.FAILED), ("4", JobState.RUNNING)]
    assert trials[0].hyperparameters == {"learning-rate": "0.01", "momentum": "0.9", "units": "32",
                                         "batch-size": "64", "optimizer": "sgd"}
    assert trials[0].final_metric is not None and trials[0].final_metric.training_step == 100
    assert job.training_output is not None and job.training_output.completed_trial_count == 2
    assert job.training_output.hyperparameter_metric_tag == "loss"


def test_dry_run_shows_the_tuning_job_for_vertex(tmp_path: Path) -> None:
    package = tmp_path / "proj" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hello')\n")
    config = tmp_path / "tuning.yaml"
    config.write_text(json.dumps({"trainingInput": {"runtimeVersion": "2.8", "hyperparameters": SPEC}}))
    result = CliRunner().invoke(root, [
        "jobs", "submit", "training", "tune_me", "--backend", "vertex", "--project", "my-project",
        "--region", "us-central1",
        "--package-path", str(package), "--module-name", "trainer.task", "--config", str(config),
        "--job-dir", "gs://bkt/out", "--dry-run", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    request = plan["request"]
    assert request["studySpec"] == EXPECTED_BODY["studySpec"]
    assert request["trialJobSpec"]["workerPoolSpecs"][0]["pythonPackageSpec"]["args"] == ["--job-dir=gs://bkt/out"]
    assert plan["vertex"] == {"hyperparameterTuningJob": request}
    text = CliRunner().invoke(root, [
        "jobs", "submit", "training", "tune_me", "--project", "my-project", "--region", "us-central1",
        "--package-path", str(package), "--module-name", "trainer.task", "--config", str(config), "--dry-run"],
        catch_exceptions=False)
    assert text.exit_code == 0, text.stderr
    assert "a HyperparameterTuningJob of up to 12 trials (3 at a time)" in text.stdout


# -- the emulator -----------------------------------------------------------------------------

PROJECT = "vertex-tuning"
STAGED = "gs://hpt/packages/hptrainer.tar.gz"
GRID = {"goal": "MAXIMIZE", "algorithm": "GRID_SEARCH", "maxTrials": 3, "maxParallelTrials": 2, "params": [
    {"parameterName": "y", "type": "INTEGER", "minValue": 1, "maxValue": 3}]}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory, trainer_sdist: Path) -> Iterator[Emulator]:
    env = {"AIPTRAIN_LOCAL_MAX_RUNNING": "2", "AIPTRAIN_LOCAL_KILL_GRACE": "3"}
    with running_emulator(tmp_path_factory.mktemp("tuning-emulator"), env=env) as server:
        server.stage(trainer_sdist, STAGED)
        yield server


@pytest.fixture
def client_home(isolated_environment: Path, emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test is the server's local client: it shares its AIPTRAIN_HOME, so it finds the token."""
    monkeypatch.setenv("AIPTRAIN_HOME", str(emulator.home))


def settings(emulator: Emulator) -> BackendSettings:
    return BackendSettings(project=PROJECT, region="us-central1", api_endpoint=emulator.url)


def follow(backend: VertexBackend | MlV1Backend, job_id: str) -> Job:
    result = follow_job(backend, job_id, on_entry=None, timeout=120, poller=AdaptivePoller(fast=0.2, ceiling=1.0))
    assert not result.timed_out
    return result.job


def check_grid_trials(job: Job, emulator: Emulator, job_id: str) -> None:
    assert job.state == JobState.SUCCEEDED, job.error_message
    trials = trials_of(job)
    assert [t.hyperparameters for t in trials] == [{"y": "2"}, {"y": "1"}, {"y": "3"}]
    assert [objective_of(t) for t in trials] == [pytest.approx(objective(0.0, y, "a")) for y in (2, 1, 3)]
    for trial_id in ("1", "2", "3"):
        record = json.loads((emulator.storage / "hpt" / "out" / job_id / trial_id / "record.json").read_text())
        assert record["tf_config"]["task"]["trial"] == trial_id


def test_vertex_backend_runs_tuning_jobs_on_the_emulator(emulator: Emulator, client_home: None) -> None:
    backend = VertexBackend(settings(emulator))
    job = tuning_job("vertex_tuned", STAGED, GRID, job_dir="gs://hpt/out/vertex_tuned")
    created = backend.create_job(job)
    assert created.job_id == "vertex_tuned"
    assert created.training_input is not None and created.training_input.hyperparameters is not None
    with pytest.raises(AlreadyExists):
        backend.create_job(job)
    plain = tuning_job("vertex_plain", STAGED, GRID)
    assert plain.training_input is not None
    plain.training_input.hyperparameters = None  # an ordinary CustomJob, listed next to the tuning one
    backend.create_job(plain)

    later = VertexBackend(settings(emulator))  # a later command finds the job by display name
    check_grid_trials(follow(later, "vertex_tuned"), emulator, "vertex_tuned")
    entries = later.read_logs("vertex_tuned")
    assert {(e.task_name, e.trial_id) for e in entries if e.message.startswith("trial ")} == {
        ("master-replica-0", "1"), ("master-replica-0", "2"), ("master-replica-0", "3")}
    assert follow(later, "vertex_plain").state == JobState.SUCCEEDED
    listed = [j.job_id for j in later.list_jobs()]
    assert listed.index("vertex_plain") < listed.index("vertex_tuned")  # newest first, across collections

    stalled = tuning_job("vertex_cancel", STAGED, {**GRID, "algorithm": "RANDOM_SEARCH"}, args=["--mode", "stall"])
    later.create_job(stalled)
    later.cancel_job("vertex_cancel")
    assert follow(later, "vertex_cancel").state == JobState.CANCELLED


def test_mlv1_backend_runs_tuning_jobs_on_the_emulator(emulator: Emulator, client_home: None) -> None:
    backend = MlV1Backend(settings(emulator))
    backend.create_job(tuning_job("mlv1_tuned", STAGED, GRID, job_dir="gs://hpt/out/mlv1_tuned"))
    check_grid_trials(follow(backend, "mlv1_tuned"), emulator, "mlv1_tuned")
    with pytest.raises(ValidationFailed) as raised:
        backend.create_job(tuning_job("mlv1_bad", STAGED, {**GRID, "maxParallelTrials": 5}))
    assert [p.path for p in raised.value.problems] == ["job.training_input.hyperparameters.max_parallel_trials"]


def test_the_emulator_checks_tuning_jobs_like_vertex(emulator: Emulator) -> None:
    client = discovery.build("aiplatform", "v1", static_discovery=True, cache_discovery=False,
                             credentials=emulator.credentials(), client_options={"api_endpoint": emulator.url})
    jobs = client.projects().locations().hyperparameterTuningJobs()
    parent = f"projects/{PROJECT}/locations/us-central1"
    body = job_to_hyperparameter_tuning_job(tuning_job("plain_tuned", STAGED, GRID), load_catalog())

    def refused(changed: dict[str, Any]) -> dict[str, Any]:
        with pytest.raises(HttpError) as raised:
            jobs.create(parent=parent, body=changed).execute()
        error: dict[str, Any] = json.loads(raised.value.content)["error"]
        return error

    unknown = refused({**body, "studySpec": {**body["studySpec"], "bogus": 1}})
    assert unknown["status"] == "INVALID_ARGUMENT" and 'Unknown name "bogus"' in unknown["message"]
    too_parallel = refused({**body, "parallelTrialCount": 9})
    assert too_parallel["details"][0]["fieldViolations"][0]["field"] == "hyperparameter_tuning_job.parallel_trial_count"
    missing = refused({key: value for key, value in body.items() if key != "maxTrialCount"})
    assert missing["details"][0]["fieldViolations"][0]["field"] == "hyperparameter_tuning_job.max_trial_count"
    two_metrics = refused({**body, "studySpec": {**body["studySpec"], "metrics": [
        {"metricId": "a", "goal": "MAXIMIZE"}, {"metricId": "b", "goal": "MINIMIZE"}]}})
    assert two_metrics["status"] == "FAILED_PRECONDITION"

    created = jobs.create(parent=parent, body=body).execute()
    assert "/hyperparameterTuningJobs/" in created["name"]
    with pytest.raises(HttpError) as raised:  # the same numeric ID is no custom job
        custom_jobs = client.projects().locations().customJobs()
        custom_jobs.get(name=created["name"].replace("hyperparameterTuningJobs", "customJobs")).execute()
    assert raised.value.resp.status == 404

    def done() -> dict[str, Any] | None:
        found: dict[str, Any] = jobs.get(name=created["name"]).execute()
        return found if found["state"] == "JOB_STATE_SUCCEEDED" else None

    from tests.fixtures.emulator import wait_until

    final = wait_until(done)
    assert [t["id"] for t in final["trials"]] == ["1", "2", "3"]
    assert final["trials"][0]["parameters"] == [{"parameterId": "y", "value": 1}]
    assert final["trials"][0]["finalMeasurement"]["metrics"][0]["metricId"] == "training/hptuning/metric"
    listed = jobs.list(parent=parent, filter='display_name="plain_tuned"').execute()
    assert [j["name"] for j in listed["hyperparameterTuningJobs"]] == [created["name"]]
