"""Whole jobs through the local backend: what every replica was given, and what the backend refuses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.local.backend import LocalBackend
from aiptrain._job.spec import Job, JobState, TrainingInput
from tests.fixtures.local_jobs import local_dir, make_job, training_input, wait_for_end


def _reports(home: Path, job_dir: str) -> dict[str, dict[str, Any]]:
    env_dir = local_dir(home, job_dir) / "env"
    return {path.stem: json.loads(path.read_text()) for path in env_dir.glob("*.json")}


@pytest.mark.parametrize(
    ("extra", "primary"),
    [
        ({"runtimeVersion": "2.11"}, "chief"),
        ({"runtimeVersion": "1.15"}, "master"),
        ({"runtimeVersion": "1.15", "useChiefInTfConfig": True}, "master"),  # no effect without a container
    ],
)
def test_custom_cluster_replicas_get_the_service_contract(
    backend: LocalBackend, home: Path, package_uri: str, extra: dict[str, str], primary: str
) -> None:
    job_dir = "gs://out/contract"
    inputs = training_input(package_uri, "tfcfg.dump_env", job_dir=job_dir, args=["--expect", "5"],
                            workers=2, parameter_servers=1, evaluators=1, runtime=None, **extra)
    job = make_job("contract", inputs)
    assert backend.unsupported(job) == []
    assert backend.request_body(job) == job.to_api()
    created = backend.create_job(job)
    assert created.state in {JobState.QUEUED, JobState.PREPARING, JobState.RUNNING}
    assert created.create_time and created.create_time.endswith("Z")
    done = wait_for_end(backend.engine, "contract")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert backend.engine.store.get(backend.project, "contract").runs_containers is False  # recorded at PREPARING
    assert done.start_time and done.end_time and done.end_time.endswith("Z")

    reports = _reports(home, job_dir)
    assert set(reports) == {"master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0",
                            "evaluator-replica-0"}
    expected_input = TrainingInput.model_validate(inputs).to_api()
    cluster = reports["master-replica-0"]["TF_CONFIG"]["cluster"]
    assert set(cluster) == {primary, "worker", "ps"}  # no evaluator, no other primary name
    assert [len(cluster[primary]), len(cluster["worker"]), len(cluster["ps"])] == [1, 2, 1]
    members = [address for addresses in cluster.values() for address in addresses]
    ports = [int(address.rsplit(":", 1)[1]) for address in members]
    assert len(set(ports)) == len(ports) == 4 and all(p > 0 for p in ports)
    for name, report in reports.items():
        config = report["TF_CONFIG"]
        assert config["cluster"] == cluster, name
        kind, _, index = name.partition("-replica-")
        task_type = {"master": primary, "worker": "worker", "ps": "ps", "evaluator": "evaluator"}[kind]
        assert config["task"] == {"type": task_type, "index": int(index)}
        assert config["job"] == expected_input
        assert config["environment"] == "cloud"
        pool = {"master": 0, "worker": 1, "ps": 2, "evaluator": 3}[kind]
        spec = report["CLUSTER_SPEC"]
        assert spec["task"] == {"type": f"workerpool{pool}", "index": int(index)}
        assert spec["cluster"]["workerpool0"] == cluster[primary]
        assert spec["cluster"]["workerpool1"] == cluster["worker"]
        assert spec["cluster"]["workerpool2"] == cluster["ps"]
        assert len(spec["cluster"]["workerpool3"]) == 1
        env = report["env"]
        assert env["CLOUD_ML_JOB_ID"] == "contract"
        assert env["AIP_MODEL_DIR"] == job_dir + "/model/"
        assert env["AIP_CHECKPOINT_DIR"] == job_dir + "/checkpoints/"
        assert env["AIP_TENSORBOARD_LOG_DIR"] == job_dir + "/logs/"
        assert env["PYTHONUNBUFFERED"] == "1"
        assert env["CLOUD_ML_TRIAL_ID"] is None
        # --job-dir comes after the user's arguments, the gs:// URI it was given, as on the service.
        assert report["argv"] == ["--expect", "5", "--job-dir", job_dir]
        # The trainer ran from the job's own installed copy, in a work dir of its own.
        assert env["PYTHONPATH"] and report["module_file"].startswith(env["PYTHONPATH"])
        assert Path(report["cwd"]).name == name
    # Evaluator port (CLUSTER_SPEC only) is distinct from the members' too.
    evaluator_port = reports["evaluator-replica-0"]["CLUSTER_SPEC"]["cluster"]["workerpool3"][0]
    assert evaluator_port not in members


GS_ARGS = ["--expect", "1", "--train-files", "gs://data/train.csv", "--eval-dir=gs://data/eval/",
           "--note", "see gs://data/x", "--plain=value"]


def test_gs_arguments_reach_the_trainer_unchanged(backend: LocalBackend, home: Path, package_uri: str) -> None:
    args = GS_ARGS
    backend.create_job(make_job("as_given", training_input(package_uri, "tfcfg.dump_env",
                                                           job_dir="gs://out/as_given", args=args)))
    done = wait_for_end(backend.engine, "as_given")
    assert done.state == JobState.SUCCEEDED, done.error_message
    argv = _reports(home, "gs://out/as_given")["master-replica-0"]["argv"]
    assert argv == [*args, "--job-dir", "gs://out/as_given"]


def test_gs_arguments_point_at_the_local_store_with_the_rewrite_setting(
    backend: LocalBackend, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_GCS", "rewrite")
    args = GS_ARGS
    backend.create_job(make_job("rewrites", training_input(package_uri, "tfcfg.dump_env",
                                                           job_dir="gs://out/rewrites", args=args)))
    done = wait_for_end(backend.engine, "rewrites")
    assert done.state == JobState.SUCCEEDED, done.error_message
    argv = _reports(home, "gs://out/rewrites")["master-replica-0"]["argv"]
    storage = home / "storage"
    assert argv == ["--expect", "1", "--train-files", str(storage / "data/train.csv"),
                    f"--eval-dir={storage / 'data/eval'}/", "--note", "see gs://data/x", "--plain=value",
                    "--job-dir", str(storage / "out/rewrites")]
    service = [e.message for e in backend.read_logs("rewrites") if e.task_name == "service"]
    assert f"Using local storage for gs://data/train.csv: {storage / 'data/train.csv'}" in service
    assert any(m.startswith("Using local storage for --job-dir gs://out/rewrites") for m in service)


def test_missing_package_fails_the_job_saying_where_it_looked(backend: LocalBackend, home: Path) -> None:
    backend.create_job(make_job("nopkg", training_input("gs://staging/packages/absent-1.0.tar.gz",
                                                        "tfcfg.quick", job_dir="gs://out/nopkg")))
    done = wait_for_end(backend.engine, "nopkg")
    assert done.state == JobState.FAILED
    assert done.error_message is not None
    assert "gs://staging/packages/absent-1.0.tar.gz does not exist" in done.error_message
    assert str(home / "storage/staging/packages/absent-1.0.tar.gz") in done.error_message


def test_plain_local_package_path_is_accepted(backend: LocalBackend, trainer_sdist: Path) -> None:
    backend.create_job(make_job("localpkg", training_input(str(trainer_sdist), "tfcfg.quick",
                                                           job_dir="gs://out/localpkg")))
    done = wait_for_end(backend.engine, "localpkg")
    assert done.state == JobState.SUCCEEDED, done.error_message


def _problems(backend: LocalBackend, inputs: dict[str, Any]) -> list[str]:
    return [p.render() for p in backend.unsupported(Job.model_validate({"jobId": "x", "trainingInput": inputs}))]


def test_backend_refuses_what_cannot_run_here(backend: LocalBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    assert backend.name == "local" and backend.default_storage == "local"
    base = {"region": "us-central1", "pythonModule": "t.task", "packageUris": ["gs://b/p.tar.gz"]}
    # No container engine answers here (tests/conftest.py): an image is refused naming both engines.
    container = _problems(backend, {**base, "scaleTier": "CUSTOM", "masterType": "n1-standard-4",
                                    "masterConfig": {"imageUri": "gcr.io/p/i", "containerCommand": ["run"]}})
    assert len(container) == 1 and "trainingInput.masterConfig.imageUri" in container[0]
    assert "custom containers need a container engine" in container[0]
    assert "Docker" in container[0] and "Podman" in container[0]
    tpu = _problems(backend, {**base, "scaleTier": "BASIC_TPU"})
    assert len(tpu) == 1 and "TPU" in tpu[0]
    big = _problems(backend, {**base, "scaleTier": "PREMIUM_1"})
    assert len(big) == 1 and "31 replicas" in big[0] and "AIPTRAIN_LOCAL_REPLICA_CAP" in big[0]
    assert _problems(backend, {**base, "scaleTier": "STANDARD_1"}) == []
    assert _problems(backend, {**base, "scaleTier": "BASIC_GPU"}) == []
    no_module = _problems(backend, {"region": "us-central1", "scaleTier": "BASIC"})
    assert len(no_module) == 1 and "pythonModule" in no_module[0]
    # Tuning runs here; its spec is the validator's to check.
    assert _problems(backend, {**base, "hyperparameters": {"goal": "MAXIMIZE", "params": []}}) == []
    monkeypatch.setenv("AIPTRAIN_LOCAL_REPLICA_CAP", "4")
    assert _problems(backend, {**base, "scaleTier": "PREMIUM_1"}) == []
    monkeypatch.setenv("AIPTRAIN_LOCAL_REPLICA_CAP", "zero")
    assert any("AIPTRAIN_LOCAL_REPLICA_CAP" in p for p in _problems(backend, {**base, "scaleTier": "BASIC"}))


def test_capped_job_logs_a_warning_and_runs_the_smaller_cluster(
    backend: LocalBackend, home: Path, package_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_REPLICA_CAP", "2")
    inputs = training_input(package_uri, "tfcfg.dump_env", job_dir="gs://out/capped", args=["--expect", "2"],
                            workers=3, parameter_servers=2)
    backend.create_job(make_job("capped", inputs))
    done = wait_for_end(backend.engine, "capped")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert set(_reports(home, "gs://out/capped")) == {"master-replica-0", "worker-replica-0"}
    warnings = [e for e in backend.read_logs("capped") if e.severity == "WARNING" and e.task_name == "service"]
    assert [e.message for e in warnings] == [
        "AIPTRAIN_LOCAL_REPLICA_CAP=2 shrank the cluster from 6 replicas (master 1, worker 3, ps 2) "
        "to 2 (master 1, worker 1)."
    ]
    listed = list(backend.list_jobs(page_size=1))
    assert [job.job_id for job in listed] == ["capped"]
