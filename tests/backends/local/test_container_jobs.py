"""Jobs whose replicas are containers, on the suite's own Docker daemon (the `containers` marker).

Each test's jobs must leave nothing on the daemon (the `docker` fixture checks it after the test).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.local.backend import LocalBackend
from aiptrain._backends.local.layout import JobLayout
from aiptrain._job.spec import JobState
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.local_jobs import PROJECT, make_job, wait_for_end, wait_until

pytestmark = pytest.mark.containers


def container_input(image: str, *, args: list[str] | None = None, job_dir: str | None = None,
                    **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"region": "us-central1", "scaleTier": "BASIC", "masterConfig": {"imageUri": image}}
    if args is not None:
        data["args"] = args
    if job_dir:
        data["jobDir"] = job_dir
    data.update(extra)
    return data


def lines(backend: LocalBackend, job_id: str, task: str = "master-replica-0") -> list[str]:
    return [entry.message for entry in backend.read_logs(job_id, limit=10000) if entry.task_name == task]


def on_daemon(docker: SuiteDocker, job_token: str) -> list[str]:
    names = docker.output("ps", "--all", "--filter", f"label=aiptrain.job={job_token}", "--format", "{{.Names}}")
    networks = docker.output("network", "ls", "--filter", f"label=aiptrain.job={job_token}", "--format",
                             "{{.Name}}")
    return names.split() + networks.split()


def test_a_basic_job_gets_what_the_service_gave_its_container(
    backend: LocalBackend, home: Path, docker: SuiteDocker, images: SuiteImages,
) -> None:
    (home / "storage" / "data").mkdir(parents=True)
    (home / "storage" / "data" / "hello.txt").write_text("hello from the store")
    script = ("echo args: \"$@\"; echo host: $(hostname); echo TF_CONFIG=$TF_CONFIG; echo CLUSTER_SPEC=$CLUSTER_SPEC; "
              "echo JOB=$CLOUD_ML_JOB_ID UNBUFFERED=$PYTHONUNBUFFERED; "
              "echo gs: $(wget -Y off -qO- \"$STORAGE_EMULATOR_HOST/storage/v1/b/data/o/hello.txt?alt=media\"); "
              "echo quota: $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) memory: "
              "$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes); echo to stderr >&2")
    backend.create_job(make_job("basic", container_input(images["shell"], args=[script, "zero", "--epochs", "3"],
                                                         job_dir="gs://out/basic")))
    done = wait_for_end(backend.engine, "basic")
    assert done.state == JobState.SUCCEEDED, done.error_message
    said = lines(backend, "basic")
    # ENTRYPOINT `sh -c` + the job's args, then --job-dir, as the service ran an image.
    assert "args: --epochs 3 --job-dir gs://out/basic" in said
    assert "host: master-replica-0" in said
    tf_config = json.loads(next(line for line in said if line.startswith("TF_CONFIG=")).split("=", 1)[1])
    assert tf_config["cluster"] == {"master": ["master-replica-0:2222"]}  # `master` unless useChiefInTfConfig
    assert tf_config["task"] == {"type": "master", "index": 0}
    assert json.loads(next(line for line in said if line.startswith("CLUSTER_SPEC=")).split("=", 1)[1])[
        "cluster"] == {"workerpool0": ["master-replica-0:2222"]}
    assert "JOB=basic UNBUFFERED=1" in said
    assert "gs: hello from the store" in said  # the job's storage endpoint, through the relay
    record = backend.engine.store.get(PROJECT, "basic")
    assert record.runs_containers is True  # recorded at PREPARING
    assert not JobLayout.of(home, record.project, record.job_id, record.key).scratch_record.exists()
    quota = next(line for line in said if line.startswith("quota:")).split()
    cores = len(os.sched_getaffinity(0))
    assert int(quota[1]) == min(4, cores) * 100_000  # BASIC's n1-standard-4, within this machine
    assert int(quota[3]) <= 15 * 1024**3
    errors = [e for e in backend.read_logs("basic") if e.task_name == "master-replica-0" and e.message == "to stderr"]
    assert errors and errors[0].severity == "ERROR"
    described = "\n".join(backend.describe_notes(backend.get_job("basic")))
    image_id = docker.output("image", "inspect", "--format", "{{.Id}}", images["shell"])
    assert f"master-replica-0: image {images['shell']} ({image_id})" in described


def test_a_failing_container_fails_the_job_naming_its_replica_and_status(
    backend: LocalBackend, docker: SuiteDocker, images: SuiteImages,
) -> None:
    backend.create_job(make_job("fails", container_input(images["shell"], args=["echo boom >&2; exit 3"])))
    done = wait_for_end(backend.engine, "fails")
    assert done.state == JobState.FAILED
    assert done.error_message is not None
    assert done.error_message.startswith("The replica master 0 exited with a non-zero status of 3. boom")


def test_a_cancel_stops_the_container_with_sigterm_and_leaves_nothing(
    backend: LocalBackend, docker: SuiteDocker, images: SuiteImages,
) -> None:
    script = "trap 'echo got TERM; exit 143' TERM; echo started; while true; do sleep 0.2; done"
    backend.create_job(make_job("stopped", container_input(images["shell"], args=[script])))
    record = backend.engine.store.get("test-project", "stopped")
    wait_until(lambda: "started" in lines(backend, "stopped"), what="the container to start")
    assert on_daemon(docker, record.run_token)  # its network, its owner, its replica
    backend.cancel_job("stopped")
    done = wait_for_end(backend.engine, "stopped")
    assert done.state == JobState.CANCELLED
    assert "got TERM" in lines(backend, "stopped")  # stopped, not killed: the trainer heard it
    assert on_daemon(docker, record.run_token) == []


def test_a_supervisor_killed_with_sigkill_leaves_nothing_once_reaped(
    backend: LocalBackend, home: Path, docker: SuiteDocker, images: SuiteImages,
) -> None:
    backend.create_job(make_job("orphan", container_input(images["shell"], args=["echo started; sleep 600"])))
    wait_until(lambda: "started" in lines(backend, "orphan"), what="the container to start")
    record = backend.engine.store.get("test-project", "orphan")
    assert record.supervisor_pid is not None
    os.kill(record.supervisor_pid, signal.SIGKILL)
    wait_until(lambda: not Path(f"/proc/{record.supervisor_pid}").exists(), what="the supervisor to die")
    assert on_daemon(docker, record.run_token)  # nothing removed them yet
    # The set's scratch directory (outside the job's files: its relays' sockets) is still there too.
    scratch_record = JobLayout.of(home, record.project, record.job_id, record.key).scratch_record
    scratch = [Path(line) for line in scratch_record.read_text().splitlines()]
    assert [(path / "relays").is_dir() for path in scratch if path.name.startswith("aiptrain-containers-")] == [True]
    done = backend.get_job("orphan")  # the reaper notices the dead supervisor
    assert done.state == JobState.FAILED and "died unexpectedly" in (done.error_message or "")
    assert on_daemon(docker, record.run_token) == []
    assert not any(path.exists() for path in scratch) and not scratch_record.exists()


def test_gpus_reach_the_engine_as_device_requests_from_the_job_share(
    backend: LocalBackend, docker: SuiteDocker, images: SuiteImages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stand-in nvidia-smi lists two GPUs; no GPU runtime exists here, so the engine refuses to
    # start the container that asks for one: the arguments it was given are what is checked.
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n[ \"$1\" = -L ] || exit 3\n"
                    "echo 'GPU 0: Tesla T4 (UUID: GPU-1)'\necho 'GPU 1: Tesla T4 (UUID: GPU-2)'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    t4 = {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}}
    inputs = container_input(images["shell"], args=["echo ran"], scaleTier="CUSTOM", masterType="n1-standard-4",
                             workerType="n1-standard-4", workerCount=1, parameterServerType="n1-standard-4",
                             parameterServerCount=1, workerConfig=t4)
    backend.create_job(make_job("gpus", inputs))
    done = wait_for_end(backend.engine, "gpus")
    created = {line.split()[4]: line for line in lines(backend, "gpus", "service")
               if line.startswith("Creating the container of")}
    assert '--gpus "device=0"' in created["worker-replica-0"]  # the one replica that asked for a GPU
    assert "--gpus" not in created["ps-replica-0"]
    assert done.state == JobState.FAILED
    assert "could not select device driver" in (done.error_message or "")


@pytest.mark.slow
def test_a_custom_cluster_trains_across_containers_that_reach_each_other_by_their_tf_config_names(
    backend: LocalBackend, home: Path, docker: SuiteDocker, images: SuiteImages,
) -> None:
    # Master (chief), 2 workers and a parameter server: the workers and the parameter server serve,
    # the chief schedules steps on them and writes its result with TensorFlow's own gs:// client.
    inputs = container_input(images["tensorflow"], args=["--mode", "ps", "--steps", "6"], job_dir="gs://out/ps",
                             scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4", workerCount=2,
                             parameterServerType="n1-standard-4", parameterServerCount=1, useChiefInTfConfig=True)
    backend.create_job(make_job("cluster", inputs))
    done = wait_for_end(backend.engine, "cluster", timeout=600)
    assert done.state == JobState.SUCCEEDED, done.error_message
    result = json.loads((home / "storage" / "out" / "ps" / "result.json").read_text())
    assert result["counter"] == 6.0
    assert result["hostname"] == "master-replica-0"
    assert result["cluster"] == {"chief": ["master-replica-0:2222"],
                                 "worker": ["worker-replica-0:2222", "worker-replica-1:2222"],
                                 "ps": ["ps-replica-0:2222"]}
    assert "worker 1 serving on worker-replica-1" in lines(backend, "cluster", "worker-replica-1")


def test_an_image_that_is_not_here_is_refused_at_submit_and_nothing_is_created(
    home: Path, docker: SuiteDocker, images: SuiteImages,
) -> None:
    from click.testing import CliRunner

    from aiptrain._cli.main import root

    before = docker.output("ps", "--all", "--quiet")
    result = CliRunner().invoke(root, ["--project", "test-project", "jobs", "submit", "training", "absent",
                                       "--region", "us-central1", "--master-image-uri", "gcr.io/p/absent:1",
                                       "--", "--epochs", "1"], catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert "trainingInput.masterConfig.imageUri: the image gcr.io/p/absent:1 is not on this machine" in result.output
    assert "docker build -t gcr.io/p/absent:1" in result.output and "docker pull gcr.io/p/absent:1" in result.output
    assert "AIPTRAIN_CONTAINER_PULL=missing" in result.output
    assert "absent" not in CliRunner().invoke(root, ["--project", "test-project", "jobs", "list"]).output
    assert docker.output("ps", "--all", "--quiet") == before


def test_a_dry_run_shows_each_replica_container_and_its_address(docker: SuiteDocker, images: SuiteImages) -> None:
    from click.testing import CliRunner

    from aiptrain._cli.main import root

    result = CliRunner().invoke(root, [
        "--project", "test-project", "--format", "json", "jobs", "submit", "training", "shown", "--dry-run",
        "--region", "us-central1", "--master-image-uri", images["shell"], "--scale-tier", "custom",
        "--master-machine-type", "n1-standard-4", "--worker-count", "1", "--worker-machine-type", "n1-highmem-2",
        "--job-dir", "gs://out-bucket/shown", "--", "--epochs", "3"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    cores = min(len(os.sched_getaffinity(0)), 4)
    assert document["localContainers"][0] == (
        f"master-replica-0: {images['shell']} --epochs 3 --job-dir gs://out-bucket/shown "
        f"[--cpus {cores} --memory {min(15 * 1024, _memory_mib())}m --pids-limit 2048]")
    assert document["localContainers"][1].startswith(f"worker-replica-0: {images['shell']} --epochs 3")
    assert document["tfConfig"]["worker-replica-0"]["cluster"] == {
        "master": ["master-replica-0:2222"], "worker": ["worker-replica-0:2222"]}
    assert docker.output("ps", "--all", "--quiet") == ""


def _memory_mib() -> int:
    with open("/proc/meminfo") as meminfo:
        return int(next(line for line in meminfo if line.startswith("MemTotal:")).split()[1]) // 1024


@pytest.mark.slow
def test_tuning_trials_get_their_parameters_as_flags_and_report_through_hypertune_inside(
    backend: LocalBackend, docker: SuiteDocker, images: SuiteImages,
) -> None:
    tuning = {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy", "maxTrials": 2, "maxParallelTrials": 2,
              "algorithm": "RANDOM_SEARCH",
              "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.5}]}
    backend.create_job(make_job("tuned", container_input(images["tensorflow"], args=["--mode", "metric"],
                                                         hyperparameters=tuning)))
    done = wait_for_end(backend.engine, "tuned", timeout=600)
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert done.training_output is not None and done.training_output.trials is not None
    trials = done.training_output.trials
    assert len(trials) == 2
    for trial in trials:
        assert trial.hyperparameters is not None and trial.final_metric is not None
        lr = float(trial.hyperparameters["lr"])
        assert trial.final_metric.objective_value == pytest.approx(1.0 - (lr - 0.3) ** 2)


def test_the_image_system_bundle_trusts_the_storage_endpoint_too(
    backend: LocalBackend, home: Path, docker: SuiteDocker, images: SuiteImages,
) -> None:
    # TensorFlow before 2.4 reads only the system's bundle: the image's own, with the job's CA added.
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    inputs = container_input(images["tensorflow"], masterConfig={
        "imageUri": images["tensorflow"], "containerCommand": ["sh", "-c"],
        "containerArgs": [f"grep -c 'BEGIN CERTIFICATE' {bundle}; tail -n 2 {bundle} | head -n 1"]})
    backend.create_job(make_job("trust", inputs))
    done = wait_for_end(backend.engine, "trust")
    assert done.state == JobState.SUCCEEDED, done.error_message
    count, last_line = lines(backend, "trust")[:2]
    image_count = Path(bundle).read_text().count("BEGIN CERTIFICATE")  # the image copied this machine's
    assert int(count) == image_count + 1
    from aiptrain._gcs_endpoint.certificates import storage_identity

    ca = storage_identity(home).ca_path.read_text().strip().splitlines()
    assert last_line == ca[-2]
    assert list((home / "cache" / "container-trust").glob("*.pem"))  # made once, kept for the next job


def test_a_killed_worker_container_is_started_again_with_its_disk_and_hostname(
    backend: LocalBackend, docker: SuiteDocker, images: SuiteImages, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_RESTART_DELAY", "0.2")
    # The worker kills itself the first time (as a VM lost: retryable), and finds its own file again after.
    worker = ("if [ -f /tmp/ran-before ]; then echo \"restarted on $(hostname)\"; sleep 60; "
              "else touch /tmp/ran-before; kill -9 $$; fi")
    master = "while ! nslookup worker-replica-0 >/dev/null 2>&1; do sleep 0.1; done; sleep 4; echo master done"
    inputs = container_input(images["shell"], scaleTier="CUSTOM", masterType="n1-standard-4",
                             workerType="n1-standard-4", workerCount=1,
                             masterConfig={"imageUri": images["shell"], "containerArgs": [master]},
                             workerConfig={"containerArgs": [worker]})
    backend.create_job(make_job("restarts", inputs))
    done = wait_for_end(backend.engine, "restarts")
    assert done.state == JobState.SUCCEEDED, done.error_message
    assert "restarted on worker-replica-0" in lines(backend, "restarts", "worker-replica-0")
    said = lines(backend, "restarts", "service")
    assert any(line.startswith("worker-replica-0 exited with a non-zero status of 137; restarting it") for line in said)


def test_google_auth_default_inside_a_container_finds_the_jobs_vm_and_its_token_opens_gs(
    backend: LocalBackend, home: Path, docker: SuiteDocker, images: SuiteImages,
) -> None:
    (home / "storage" / "vmdata").mkdir(parents=True)
    (home / "storage" / "vmdata" / "seen.txt").write_text("from the VM")
    account = "trainer@example-project.iam.gserviceaccount.com"
    backend.create_job(make_job("vm", container_input(images["tensorflow"], args=["--mode", "auth", "--bucket",
                                                                                  "vmdata"],
                                                      serviceAccount=account)))
    done = wait_for_end(backend.engine, "vm")
    assert done.state == JobState.SUCCEEDED, done.error_message
    found = json.loads(next(line for line in lines(backend, "vm") if line.startswith("{")))
    # The job's own metadata server, reached through the relay at its host address: its project and
    # account, and a token the storage endpoint accepts (it refuses any other bearer token).
    assert found["kind"] == "google.auth.compute_engine.credentials"
    assert (found["project"], found["email"]) == (PROJECT, account)
    assert (found["listing"], found["names"]) == (200, ["seen.txt"])
