"""The Ray backend without a cluster: addresses, bundles, refusals, the log format, dry-run."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from aiptrain.backends.ray import joblog
from aiptrain.backends.ray.plan import bundles_for, ray_problems, replica_runtime_envs
from aiptrain.backends.ray.settings import jobs_api_address, resource_scale
from aiptrain.cli.main import root
from aiptrain.errors import UsageError
from aiptrain.job.catalog import load_catalog
from aiptrain.job.cluster import resolve_cluster
from aiptrain.job.spec import Job, JobState, TrainingInput
from tests.template.harness import TEMPLATE_DIR


def job(**training_input: object) -> Job:
    return Job.model_validate({"jobId": "j", "trainingInput": {"pythonModule": "trainer.task", "region": "us-central1",
                                                               **training_input}})


def training_input_of(**training_input: object) -> TrainingInput:
    given = job(**training_input).training_input
    assert given is not None
    return given


@pytest.mark.parametrize(("given", "expected"), [
    ("http://head:8265", "http://head:8265"),
    ("head:8265", "http://head:8265"),
    ("https://ray.example.org/", "https://ray.example.org"),
])
def test_the_jobs_api_address_is_an_http_url(given, expected):
    assert jobs_api_address(given, env={}) == expected


def test_the_address_comes_from_the_flag_then_aiptrain_then_ray_variables():
    env = {"AIPTRAIN_RAY_ADDRESS": "http://a:1", "RAY_ADDRESS": "http://b:2"}
    assert jobs_api_address("http://flag:3", env=env) == "http://flag:3"
    assert jobs_api_address(None, env=env) == "http://a:1"
    assert jobs_api_address(None, env={"RAY_ADDRESS": "http://b:2"}) == "http://b:2"


@pytest.mark.parametrize(("given", "says"), [
    (None, "needs the address of a Ray cluster"),
    ("ray://head:10001", "Ray Client address"),
    ("head:6379", "the GCS port"),
    ("ftp://head:8265", "not an http(s) address"),
])
def test_addresses_that_are_not_a_jobs_api_are_refused_with_a_hint(given, says):
    with pytest.raises(UsageError) as refused:
        jobs_api_address(given, env={})
    assert says in refused.value.message
    assert "8265" in (refused.value.hint or "")


def test_the_resource_scale_is_a_fraction():
    assert resource_scale(None, env={}) == 1.0
    assert resource_scale(None, env={"AIPTRAIN_RAY_RESOURCE_SCALE": "0.5"}) == 0.5
    for bad in (0.0, 1.5, -1.0):
        with pytest.raises(UsageError):
            resource_scale(bad, env={})


def test_bundles_follow_the_machine_type_catalog_and_the_scale():
    catalog = load_catalog()
    groups = resolve_cluster(training_input_of(scaleTier="CUSTOM", masterType="complex_model_m",
                                               workerType="n1-standard-8", workerCount="2",
                                               workerConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4",
                                                                                   "count": "2"}}), catalog)
    full = bundles_for(groups, catalog)
    assert [b.task_name for b in full] == ["master-replica-0", "worker-replica-0", "worker-replica-1"]
    # complex_model_m is the legacy name of n1-highcpu-16: 16 vCPUs, 14.4 GB.
    assert full[0].resources() == {"CPU": 16.0, "memory": 14.4e9}
    assert full[1].resources() == {"CPU": 8.0, "memory": 30e9, "GPU": 2.0}
    quarter = bundles_for(groups, catalog, 0.25)
    assert quarter[1].resources() == {"CPU": 2.0, "memory": 7.5e9, "GPU": 2.0}  # GPUs are never scaled


def test_replicas_get_the_runtime_catalog_packages_with_the_gpu_build_where_they_have_gpus():
    catalog = load_catalog()
    training_input = training_input_of(scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-8",
                                       workerCount="1", runtimeVersion="2.11",
                                       workerConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}})
    bundles = bundles_for(resolve_cluster(training_input, catalog), catalog)
    envs = replica_runtime_envs(training_input, bundles, catalog, "uv")
    master, worker = envs["master-replica-0"]["uv"]["packages"], envs["worker-replica-0"]["uv"]["packages"]
    assert "tensorflow-cpu==2.15.1" in master and "pandas==2.1.4" in master
    assert "tensorflow[and-cuda]==2.15.1" in worker and "tensorflow-cpu==2.15.1" not in worker
    assert replica_runtime_envs(training_input, bundles, catalog, "cluster") == {}


def test_what_ray_cannot_run_is_refused_naming_the_field():
    catalog = load_catalog()
    paths = {p.path for p in ray_problems(job(scaleTier="BASIC_TPU"), catalog)}
    assert "trainingInput.scaleTier" in paths
    container = ray_problems(job(scaleTier="CUSTOM", masterType="n1-standard-4",
                                 masterConfig={"imageUri": "gcr.io/p/i"}), catalog)
    assert [p.path for p in container] == ["trainingInput.masterConfig.imageUri"]
    local_package = ray_problems(job(packageUris=["/home/me/trainer.tar.gz"]), catalog)
    assert [p.path for p in local_package] == ["trainingInput.packageUris[0]"]
    assert ray_problems(job(scaleTier="STANDARD_1"), catalog) == []


def test_driver_lines_read_back_as_entries_with_their_tasks_and_messages():
    start = datetime(2026, 1, 2, tzinfo=UTC)
    lines = [
        "2026-01-02 00:00:00,1 INFO job_manager.py -- Runtime env is setting up.",
        joblog.format_line(start + timedelta(seconds=1), "WARNING", "service", "a\nb \\ c", None),
        joblog.format_line(start + timedelta(seconds=2), "ERROR", "worker-replica-0", "Traceback", "3"),
    ]
    entries = joblog.parse_log("\n".join(lines), since=start)
    assert [(e.task_name, e.severity, e.message, e.trial_id) for e in entries] == [
        ("service", "INFO", lines[0], None),
        ("service", "WARNING", "a\nb \\ c", None),
        ("worker-replica-0", "ERROR", "Traceback", "3"),
    ]
    assert entries[0].cursor < entries[1].cursor < entries[2].cursor


def test_a_log_read_as_it_grows_gives_the_entries_of_a_whole_read():
    start = datetime(2026, 1, 2, tzinfo=UTC)
    text = "\n".join([
        "Ray says hello",
        joblog.format_line(start + timedelta(seconds=1), "INFO", "master-replica-0", "step\t1", "2"),
        "",
        joblog.format_line(start + timedelta(seconds=2), "ERROR", "service", "a\nb", None),
        "Ray says bye",
    ])
    whole = joblog.parse_log(text, since=start)
    for size in (1, 7, 50):
        parser = joblog.LogParser(start)
        for offset in range(0, len(text), size):
            parser.feed(text[offset:offset + size])
        assert parser.entries == whole[:-1]  # the last line has no newline yet: it waits
        parser.finish()
        assert parser.entries == whole
        assert parser.after(whole[2].cursor) == whole[3:]
    assert joblog.parse_log(text, since=start, complete=False) == whole[:-1]


def test_the_lifecycle_follows_the_driver_lines():
    start = datetime(2026, 1, 2, tzinfo=UTC)

    def state_after(*messages: str) -> joblog.Lifecycle:
        text = "\n".join(joblog.format_line(start, "INFO", "service", m, None) for m in messages)
        return joblog.lifecycle(joblog.parse_log(text, since=start))

    assert state_after(joblog.WAITING_PREFIX + "no room").state == JobState.QUEUED
    assert state_after(joblog.WAITING_PREFIX + "no room").waiting == "no room"
    assert state_after(joblog.PREPARING_LINE).state == JobState.PREPARING
    running = state_after(joblog.PREPARING_LINE, joblog.RUNNING_LINE)
    assert running.state == JobState.RUNNING and running.start_time == start
    assert state_after(joblog.RUNNING_LINE, joblog.CANCEL_REQUESTED_LINE).state == JobState.CANCELLING
    failed = state_after(joblog.RUNNING_LINE, joblog.FAILED_PREFIX + "The replica x exited\nlast line")
    assert failed.error_message == "The replica x exited\nlast line"


SUBMIT = ["jobs", "submit", "training", "ray_dry", "--backend", "ray", "--region", "us-central1",
          "--package-path", str(TEMPLATE_DIR / "trainer"), "--module-name", "trainer.task",
          "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
          "--worker-machine-type", "n1-standard-8", "--worker-count", "1", "--job-dir", "gs://bkt/ray_dry"]


def test_dry_run_prints_the_ray_job_without_a_cluster(monkeypatch):
    monkeypatch.delenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", raising=False)
    result = CliRunner().invoke(root, [*SUBMIT, "--dry-run", "--format", "json", "--ray-resource-scale", "0.5"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert any("--ray-resource-scale 0.5" in warning for warning in document["warnings"])
    request = document["request"]
    assert request["submissionId"] == "ray_dry"
    assert request["entrypoint"] == "python -m aiptrain.backends.ray.driver"
    assert request["runtimeEnv"]["py_modules"][0].endswith("aiptrain")
    assert request["metadata"]["aiptrain.project"] == "local-project"
    assert "tensorflow-cpu==2.15.1" in request["replicaRuntimeEnvs"]["worker-replica-0"]["pip"]["packages"]
    assert "installed for each replica through a Ray runtime environment (pip)" in request["runtimeNotes"][1]
    assert json.loads(request["metadata"]["aiptrain.job"])["trainingInput"]["packageUris"][0].startswith("gs://bkt/")
    assert "trials" not in request
    assert request["placementGroup"] == {"strategy": "SPREAD", "bundles": [
        {"taskName": "master-replica-0", "machineType": "n1-standard-4", "CPU": 2.0, "memory": 7.5e9},
        {"taskName": "worker-replica-0", "machineType": "n1-standard-8", "CPU": 4.0, "memory": 15e9},
    ]}


def test_dry_run_of_a_tuning_job_shows_its_study_and_bundles(tmp_path):
    spec = {"goal": "MAXIMIZE", "maxTrials": 4, "maxParallelTrials": 2, "hyperparameterMetricTag": "accuracy",
            "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}
    config = tmp_path / "hp.json"
    config.write_text(json.dumps({"trainingInput": {"hyperparameters": spec}}))
    result = CliRunner().invoke(root, [*SUBMIT, "--config", str(config), "--dry-run", "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)["request"]
    assert json.loads(request["metadata"]["aiptrain.job"])["trainingInput"]["hyperparameters"]["maxParallelTrials"] == 2
    assert [b["taskName"] for b in request["placementGroup"]["bundles"]] == ["master-replica-0", "worker-replica-0"]
    assert request["trials"]["maxTrials"] == 4 and request["trials"]["maxParallelTrials"] == 2


def test_a_tpu_job_is_refused_before_anything_is_built():
    result = CliRunner().invoke(root, [*SUBMIT[:8], "--package-path", str(TEMPLATE_DIR / "trainer"),
                                       "--module-name", "trainer.task", "--scale-tier", "basic-tpu",
                                       "--ray-address", "http://127.0.0.1:9"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "trainingInput.scaleTier" in result.stderr and "Cloud TPUs" in result.stderr


def test_without_ray_installed_the_backend_names_the_extra():
    # sys.modules["ray"] = None is Python's own way of making a module unimportable.
    probe = ("import sys; sys.modules['ray'] = None; from aiptrain.cli.main import root; "
             "root.main(args=sys.argv[1:], prog_name='aiptrain')")
    result = subprocess.run([sys.executable, "-c", probe, "jobs", "list", "--backend", "ray"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "pip install -e '.[ray]'" in result.stderr
