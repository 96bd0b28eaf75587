"""The Ray backend without a cluster: addresses, bundles, refusals, the log format, dry-run."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from aiptrain._backends.ray import joblog
from aiptrain._backends.ray.node_fit import NodeSize, container_refusal, fit_refusal
from aiptrain._backends.ray.node_preparation import BUILD, INSTALL, NOTE, PHASE, READY
from aiptrain._backends.ray.plan import CONTAINER_RESOURCE, bundles_for, ray_problems, replica_environments
from aiptrain._backends.ray.preparation_log import PreparationLog
from aiptrain._backends.ray.settings import (
    jobs_api_address,
    node_cache_dir,
    resource_scale,
    runtime_packages_mode,
    runtime_packages_note,
)
from aiptrain._cli.main import root
from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, JobState, TrainingInput
from aiptrain.errors import UsageError
from tests.fixtures.template import TEMPLATE_DIR


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


def test_replicas_run_the_runtime_s_own_environment_with_the_gpu_build_where_they_have_gpus():
    catalog = load_catalog()
    training_input = training_input_of(scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-8",
                                       workerCount="1", runtimeVersion="2.11",
                                       workerConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}})
    bundles = bundles_for(resolve_cluster(training_input, catalog), catalog)
    envs = replica_environments(training_input, bundles, catalog, "build")
    master, worker = envs["master-replica-0"], envs["worker-replica-0"]
    # Runtime 2.11's own TensorFlow on its own Python (3.7), not the cluster's.
    assert (master["environment"], master["tensorflow"], master["python"]) == ("runtime-2.11", "2.11.0", "3.7")
    assert "tensorflow-cpu==2.11.0" in master["packages"] and "pandas==1.3.5" in master["packages"]
    assert "tensorflow==2.11.0" in worker["packages"] and "tensorflow-cpu==2.11.0" not in worker["packages"]
    assert "AIPTRAIN_RAY_CACHE_DIR" in master["builtOn"]
    cluster = replica_environments(training_input, bundles, catalog, "cluster")
    assert set(cluster) == {"master-replica-0", "worker-replica-0"}
    assert all("AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster" in env["python"] for env in cluster.values())


def test_pip_and_uv_are_read_as_the_node_builder_with_a_note_and_other_modes_are_refused():
    assert runtime_packages_mode({}) == "build" and runtime_packages_note({}) is None
    for retired in ("pip", "uv"):
        env = {"AIPTRAIN_RAY_RUNTIME_PACKAGES": retired}
        assert runtime_packages_mode(env) == "build"
        note = runtime_packages_note(env)
        assert note is not None and f"Ray's {retired} runtime_env plugin" in note
    assert runtime_packages_mode({"AIPTRAIN_RAY_RUNTIME_PACKAGES": "cluster"}) == "cluster"
    with pytest.raises(UsageError, match="'conda' is not one of build, cluster"):
        runtime_packages_mode({"AIPTRAIN_RAY_RUNTIME_PACKAGES": "conda"})


def test_a_node_keeps_its_environments_in_its_cache_directory(tmp_path):
    assert node_cache_dir({"AIPTRAIN_RAY_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert node_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "aiptrain" / "ray"


NODES = [NodeSize("10.0.0.3 (a1b2c3d4)", 4, 16e9, 0), NodeSize("10.0.0.4 (e5f6a7b8)", 8, 30e9, 0)]


def test_a_replica_larger_than_every_node_is_refused_with_the_numbers_and_a_scale_that_fits():
    catalog = load_catalog()
    groups = resolve_cluster(training_input_of(scaleTier="CUSTOM", masterType="n1-highcpu-96",
                                               workerType="n1-standard-4", workerCount="2"), catalog)
    refusal = fit_refusal(bundles_for(groups, catalog), NODES, 1.0)
    assert refusal is not None and refusal.exit_code == 2
    assert "master-replica-0: 96 CPU, 80.47 GiB" in refusal.message and "(n1-highcpu-96)" in refusal.message
    assert "10.0.0.4 (e5f6a7b8): 8 CPU, 27.9 GiB; 10.0.0.3 (a1b2c3d4): 4 CPU, 14.9 GiB" in refusal.message
    assert refusal.hint is not None and "--ray-resource-scale 0.08" in refusal.hint
    # At the scale suggested every replica fits a node; a job that fits the nodes is never refused.
    assert fit_refusal(bundles_for(groups, catalog, 0.08), NODES, 0.08) is None
    assert fit_refusal(bundles_for(groups, catalog, 0.09), NODES, 0.09) is not None
    assert fit_refusal(bundles_for(groups, catalog), [], 1.0) is None  # no nodes listed: nothing to say
    gpu = resolve_cluster(training_input_of(scaleTier="CUSTOM", masterType="n1-standard-4",
                                            masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4",
                                                                                "count": "1"}}), catalog)
    no_gpu = fit_refusal(bundles_for(gpu, catalog), NODES, 1.0)
    assert no_gpu is not None and no_gpu.hint is not None and "no node has that many GPUs" in no_gpu.hint


def test_preparing_says_which_node_builds_and_how_many_replicas_wait():
    log = PreparationLog("1.15", {"master-replica-0": "A", "worker-replica-0": "B", "worker-replica-1": "A",
                                  "ps-replica-0": "B"})
    summary = "Runtime version 1.15 with Python 3.7: TensorFlow 1.15.0 on Python 3.7 (/usr/bin/python3.7, PATH)."
    assert log.event("master-replica-0", NOTE, "INFO", summary, 0) == [("INFO", f"On node A: {summary}")]
    assert log.event("worker-replica-0", NOTE, "INFO", summary, 0) == []  # the same on node B: said once
    assert log.event("master-replica-0", PHASE, "", "building", 1) == [
        ("INFO", "Building runtime 1.15 on node A (4 of 4 replicas waiting).")]
    assert log.event("master-replica-0", BUILD, "INFO", "Resolved 50 packages in 3.37s", 2) == [
        ("INFO", "node A: Resolved 50 packages in 3.37s")]
    waiting = log.event("worker-replica-0", PHASE, "", "waiting", 2)
    assert waiting[0][1].startswith("Waiting on node B: runtime 1.15's environment is being built there by another")
    assert log.event("worker-replica-0", BUILD, "INFO", "Waiting for another job ...", 2) == []  # not its build
    assert log.heartbeat(20) == []
    assert log.heartbeat(40) == [("INFO", "Still building runtime 1.15 on node A (39 s; 4 of 4 replicas waiting).")]
    runs = '{"environment": "runtime-1.15", "tensorflow": "1.15.0", "python": "3.7", "root": "/c/envs/k"}'
    assert log.event("master-replica-0", READY, "", runs, 41) == [
        ("INFO", "Runtime 1.15 is ready on node A (built in 40 s): TensorFlow 1.15.0 on Python 3.7 (/c/envs/k).")]
    log.finished("master-replica-0")
    assert log.event("worker-replica-1", READY, "", runs, 42) == []  # node A's second replica found it
    assert log.event("worker-replica-1", INSTALL, "INFO", "Installing package(s): gs://b/t.tar.gz", 42) == [
        ("INFO", "worker-replica-1: Installing package(s): gs://b/t.tar.gz")]
    assert log.failure("worker-replica-1", "no such package") == "worker-replica-1: no such package"
    assert log.failure("ps-replica-0", "uv failed") == "On node B (ps-replica-0): uv failed"
    assert log.mismatch() is None
    fallback = '{"environment": "tf2.15-keras2", "tensorflow": "2.15.1", "python": "3.11", "root": "/c/envs/f"}'
    log.event("worker-replica-0", READY, "", fallback, 50)
    mismatch = log.mismatch()
    assert mismatch is not None and "node A: runtime-1.15 (TensorFlow 1.15.0 on Python 3.7)" in mismatch
    assert "node B: tf2.15-keras2 (TensorFlow 2.15.1 on Python 3.11)" in mismatch


def test_what_ray_cannot_run_is_refused_naming_the_field():
    catalog = load_catalog()
    paths = {p.path for p in ray_problems(job(scaleTier="BASIC_TPU"), catalog)}
    assert "trainingInput.scaleTier" in paths
    # An image runs as a container on a node that offers an engine (`container_refusal`), no module needed.
    assert ray_problems(job(scaleTier="CUSTOM", masterType="n1-standard-4", pythonModule=None,
                            masterConfig={"imageUri": "gcr.io/p/i"}), catalog) == []
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
    ran_in = ["master-replica-0: image shell:1 (sha256:ab), container j-master-replica-0 on docker (node n1)"]
    containers = state_after(joblog.PREPARING_LINE, joblog.RAN_IN_PREFIX + json.dumps(ran_in), joblog.RUNNING_LINE)
    assert containers.ran_in == ran_in and containers.state == JobState.RUNNING
    # Describe's lines, not the log's: readers of the log leave them out.
    text = joblog.format_line(start, "INFO", "service", joblog.RAN_IN_PREFIX + json.dumps(ran_in), None)
    assert [joblog.is_output_line(entry) for entry in joblog.parse_log(text, since=start)] == [True]


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
    assert request["entrypoint"] == "python -m aiptrain._backends.ray.driver"
    assert request["runtimeEnv"]["py_modules"][0].endswith("aiptrain")
    assert request["metadata"]["aiptrain.project"] == "local-project"
    # No --runtime-version: the service's default, 1.0, on its own TensorFlow.
    assert request["replicaEnvironments"]["worker-replica-0"]["packages"][0] == "tensorflow==1.0.1"
    assert "built with uv on the replica's node" in request["runtimeNotes"][0]
    # `ray job stop` waits for the driver to stop the replicas and the builds (kill grace + 15 s).
    assert request["runtimeEnv"]["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "20"
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
    probe = ("import sys; sys.modules['ray'] = None; from aiptrain._cli.main import root; "
             "root.main(args=sys.argv[1:], prog_name='aiptrain')")
    result = subprocess.run([sys.executable, "-c", probe, "jobs", "list", "--backend", "ray"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "pip install -e '.[ray]'" in result.stderr


def test_dry_run_renders_the_plan_where_ray_cannot_be_imported():
    # sys.modules["ray"] = None makes `import ray` fail, as on a machine without Ray; no address either.
    probe = ("import sys; sys.modules['ray'] = None; from aiptrain._cli.main import root; "
             "root.main(args=sys.argv[1:], prog_name='aiptrain')")
    result = subprocess.run([sys.executable, "-c", probe, *SUBMIT, "--runtime-version", "1.15", "--python-version",
                             "3.7", "--dry-run", "--format", "json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    request = document["request"]
    assert [b["taskName"] for b in request["placementGroup"]["bundles"]] == ["master-replica-0", "worker-replica-0"]
    environments = request["replicaEnvironments"]
    assert {task: (e["tensorflow"], e["python"]) for task, e in environments.items()} == {
        "master-replica-0": ("1.15.0", "3.7"), "worker-replica-0": ("1.15.0", "3.7")}
    tf_configs = document["tfConfig"]
    assert tf_configs["worker-replica-0"]["task"] == {"type": "worker", "index": 0}
    assert "master" in tf_configs["worker-replica-0"]["cluster"]


def test_dry_run_says_how_each_way_to_the_runtime_packages_runs(monkeypatch):
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "cluster")
    result = CliRunner().invoke(root, [*SUBMIT, "--dry-run", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)["request"]
    assert all("the node's own" in env["python"] for env in request["replicaEnvironments"].values())
    assert any("AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster" in line for line in request["runtimeNotes"])
    # The retired pip (Ray's runtime_env plugin) is read as the node builder, and the job's log says so.
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "pip")
    result = CliRunner().invoke(root, [*SUBMIT, "--dry-run", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["request"]["replicaEnvironments"]["master-replica-0"]["environment"] == "runtime-1.0"
    assert any("AIPTRAIN_RAY_RUNTIME_PACKAGES=pip is read as `build`" in line for line in document["warnings"])
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "conda")
    refused = CliRunner().invoke(root, [*SUBMIT, "--dry-run"], catch_exceptions=False)
    assert refused.exit_code == 2 and "AIPTRAIN_RAY_RUNTIME_PACKAGES" in refused.stderr


def test_container_replicas_go_to_nodes_offering_an_engine_and_none_is_refused_naming_the_nodes():
    catalog = load_catalog()
    training_input = TrainingInput.model_validate({"scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                                   "workerType": "n1-standard-4", "workerCount": "1",
                                                   "masterConfig": {"imageUri": "gcr.io/p/i"}})
    bundles = bundles_for(resolve_cluster(training_input, catalog), catalog)
    assert all(bundle.resources()[CONTAINER_RESOURCE] > 0 for bundle in bundles)  # the workers' image too
    refusal = container_refusal(bundles, NODES)
    assert refusal is not None and "10.0.0.3 (a1b2c3d4); 10.0.0.4 (e5f6a7b8)" in refusal.message
    assert CONTAINER_RESOURCE in (refusal.hint or "")
    with_engine = [NODES[0], NodeSize("10.0.0.4 (e5f6a7b8)", 8, 30e9, 0, containers=1000)]
    assert container_refusal(bundles, with_engine) is None
    # Only the node with an engine can hold them: one that is too small for it is the fit's refusal.
    assert fit_refusal(bundles, [NodeSize("10.0.0.4 (e5f6a7b8)", 2, 30e9, 0, containers=1000), NODES[1]],
                       1.0) is not None
    packages = bundles_for(resolve_cluster(TrainingInput.model_validate({"scaleTier": "BASIC"}), catalog), catalog)
    assert container_refusal(packages, NODES) is None and CONTAINER_RESOURCE not in packages[0].resources()
def test_each_node_resolves_the_trainers_packages_as_of_the_jobs_day() -> None:
    import datetime

    from aiptrain._backends.ray.plan import planned_resolution
    from aiptrain._backends.ray.runtime_spec import runtime_spec, spec_catalog, spec_day, spec_training_input

    catalog = load_catalog()
    training_input = TrainingInput(runtime_version="1.15", python_version="3.7")
    spec = json.loads(json.dumps(runtime_spec(training_input, catalog, {"team": "a"})))  # as it travels
    resolution = planned_resolution(spec_training_input(spec), spec_catalog(spec))
    assert resolution.cutoff == "2020-12-19"  # the runtime's entry carries its day to the node
    assert spec_day(spec, resolution).day == datetime.date(2020, 12, 19)
    spec["resolveAsOf"] = "2021-02-01"  # the submitter's AIPTRAIN_RESOLVE_AS_OF
    assert spec_day(spec, resolution).day == datetime.date(2021, 2, 1)
    labelled = runtime_spec(training_input, catalog, {"aiptrain-resolve-as-of": "2021-03-01"})
    assert spec_day({**labelled, "resolveAsOf": "2021-02-01"}, resolution).day == datetime.date(2021, 3, 1)
