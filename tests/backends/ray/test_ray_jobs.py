"""Jobs on a real two-node Ray cluster: the template as MultiWorkerMirroredStrategy and as
ParameterServerStrategy, a worker killed mid-run, cancel, a job too big for the cluster, bad
addresses. Every job is submitted through the real command line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from aiptrain._backends.ray.replica_host import SCRATCH_ROOT
from aiptrain._replicas.processes import tokened_processes
from tests.backends.ray.cluster import RayCluster
from tests.backends.ray.harness import (
    JOB_TIMEOUT,
    actor_nodes,
    aiptrain,
    backend,
    cluster_node_ids,
    log_text,
    wait_until,
)
from tests.fixtures.template import TEMPLATE_DIR, TINY_HYPERPARAMETERS

pytestmark = pytest.mark.ray_cluster

RAY_TRAINERS = Path(__file__).parent / "trainers"


def submit_args(job_id: str, digits: Path, *, workers: int = 1, ps: int = 0, steps: int = 60,
                master: str = "n1-standard-4", scale: str | None = "0.25", flags: tuple[str, ...] = ()) -> list[str]:
    args = ["jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
            "--package-path", str(TEMPLATE_DIR / "trainer"), "--module-name", "trainer.task",
            "--runtime-version", "2.11", "--python-version", "3.7", "--scale-tier", "custom",
            "--master-machine-type", master, "--job-dir", f"gs://ray-jobs/{job_id}", "--labels", "team=ml"]
    if scale:
        args += ["--ray-resource-scale", scale]
    if workers:
        args += ["--worker-machine-type", "n1-standard-4", "--worker-count", str(workers)]
    if ps:
        args += ["--parameter-server-machine-type", "n1-standard-4", "--parameter-server-count", str(ps)]
    data = ["--train-files", str(digits / "train-*.csv"), "--eval-files", str(digits / "eval-*.csv")]
    return [*args, *flags, "--", *data,
            *TINY_HYPERPARAMETERS, "--train-steps", str(steps), "--checkpoint-steps", "20", "--log-steps", "10"]


def lifecycle_args(job_id: str, *, workers: int = 1) -> list[str]:
    """A job of the TensorFlow-free trainer that steps until it is stopped: for the scenarios about
    the job's life (restart, cancel, node loss), where TensorFlow's start-up would only cost time."""
    return ["jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
            "--package-path", str(RAY_TRAINERS / "raytrainer"), "--module-name", "raytrainer.task",
            "--runtime-version", "2.11", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
            "--worker-machine-type", "n1-standard-4", "--worker-count", str(workers),
            "--ray-resource-scale", "0.25", "--job-dir", f"gs://ray-jobs/{job_id}",
            "--", "--steps", "0", "--step-seconds", "0.5"]


def test_mirrored_and_parameter_server_jobs_train_across_both_nodes_while_a_job_too_big_waits_queued(
        on_cluster, digits_dir):
    # A job asking for more than the cluster has (3 replicas of 4 CPUs, each fitting a 4-CPU node,
    # on 2 nodes) waits beside them without holding anything back.
    too_big = "ray_too_big"
    submitted = aiptrain(*submit_args(too_big, digits_dir, workers=2, scale=None))
    assert submitted.returncode == 0, submitted.stderr
    # The two template jobs run side by side (6 bundles of 1 CPU on the 2 x 4 CPUs): each follows its own logs.
    ps_job = subprocess.Popen(
        [sys.executable, "-m", "aiptrain", *submit_args("ray_ps", digits_dir, workers=2, ps=1, steps=40,
                                                         flags=("--stream-logs",))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        check_mirrored_job(on_cluster, digits_dir)
        _, ps_stderr = ps_job.communicate(timeout=JOB_TIMEOUT)
    finally:
        ps_job.kill()
    check_parameter_server_job(on_cluster, ps_job.returncode, ps_stderr)

    wait_until(lambda: "Waiting for the cluster:" in log_text(on_cluster, too_big), "the waiting message", 120)
    logs = log_text(on_cluster, too_big)
    assert "3 replica(s) need master-replica-0 4 CPU, 13.97 GiB" in logs and "The job stays QUEUED" in logs
    assert backend(on_cluster).get_job(too_big).state == "QUEUED"
    assert aiptrain("jobs", "cancel", too_big, "--backend", "ray").returncode == 0
    assert aiptrain("jobs", "wait", too_big, "--backend", "ray", "--timeout", "120").returncode == 11


def check_mirrored_job(on_cluster: RayCluster, digits_dir: Path) -> None:
    job_id = "ray_mwms"
    result = aiptrain(*submit_args(job_id, digits_dir, workers=1, flags=("--stream-logs",)))
    assert result.returncode == 0, result.stderr[-4000:]
    logs = result.stderr
    assert "2 synchronous workers: MultiWorkerMirroredStrategy" in logs
    for task in ("master-replica-0", "worker-replica-0"):
        assert f"\t{task}\t" in logs  # every replica's lines, with the local prefixes
        assert f"{task} runs on node" in logs
    assert "training complete at step 60" in logs
    assert "--ray-resource-scale 0.25" in logs  # the scaled bundles are said in the log
    # TF_CONFIG named the primary `chief` (runtime 2.x) and the trainer's outputs landed in the job dir.
    assert "[chief:0]" in logs and "[worker:0]" in logs
    home = Path(os.environ["AIPTRAIN_HOME"])
    assert (home / "storage" / "ray-jobs" / job_id / "model" / "saved_model.pb").exists()
    assert not (SCRATCH_ROOT / "jobs" / job_id).exists()  # the replicas' directories left with them
    # One bundle per replica, on both nodes (SPREAD), seen by Ray's own state API.
    nodes = actor_nodes(on_cluster, job_id, ["master-replica-0", "worker-replica-0"])
    assert set(nodes.values()) == cluster_node_ids(on_cluster)
    # The Ray job carries the job ID as its submission ID and the labels in its metadata.
    info = backend(on_cluster).client.get_job_info(job_id)
    assert info.submission_id == job_id and info.metadata["team"] == "ml"
    described = aiptrain("jobs", "describe", job_id, "--backend", "ray", "--format", "json")
    assert '"state": "SUCCEEDED"' in described.stdout and '"startTime"' in described.stdout
    listed = aiptrain("jobs", "list", "--backend", "ray")
    assert job_id in listed.stdout and "SUCCEEDED" in listed.stdout
    only_worker = aiptrain("jobs", "stream-logs", job_id, "--backend", "ray", "--task-name", "worker-replica-0")
    assert only_worker.returncode == 0
    assert {line.split("\t")[2] for line in only_worker.stdout.splitlines() if line} == {"worker-replica-0"}


def check_parameter_server_job(on_cluster: RayCluster, returncode: int | None, stderr: str) -> None:
    """Chief + 2 workers + 1 parameter server, as followed by its own `--stream-logs`."""
    assert returncode == 0, stderr[-4000:]
    assert "2 workers, 1 parameter servers: ParameterServerStrategy" in stderr
    tasks = ["master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0"]
    for task in tasks:
        assert f"\t{task}\t" in stderr
    nodes = actor_nodes(on_cluster, "ray_ps", tasks)
    assert set(nodes.values()) == cluster_node_ids(on_cluster)
    # The parameter server never exits on its own: it was stopped once the chief finished.
    assert "Stopping ps-replica-0" in stderr


def test_a_killed_worker_is_restarted_and_cancel_stops_every_replica_on_every_node(on_cluster):
    job_id = "ray_restart_cancel"
    submitted = aiptrain(*lifecycle_args(job_id))
    assert submitted.returncode == 0, submitted.stderr
    token = f"aiptrain-ray/{job_id}"
    wait_until(lambda: "[worker:0] step 1" in log_text(on_cluster, job_id), "the worker to run")
    nodes = actor_nodes(on_cluster, job_id, ["master-replica-0", "worker-replica-0"])
    assert set(nodes.values()) == cluster_node_ids(on_cluster)  # cancel has replicas on both nodes to stop
    victims = tokened_processes(f"{token}/worker-replica-0")
    assert victims
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    # The local engine's rules: a killed worker is restarted, with the same TF_CONFIG.
    wait_until(lambda: log_text(on_cluster, job_id).count("[worker:0] started") >= 2, "the worker to start again")
    logs = log_text(on_cluster, job_id)
    assert "worker-replica-0 was killed by signal 9 (SIGKILL)" in logs
    assert "restarting" in logs
    assert backend(on_cluster).get_job(job_id).state == "RUNNING"

    cancelled = aiptrain("jobs", "cancel", job_id, "--backend", "ray")
    assert cancelled.returncode == 0, cancelled.stderr
    waited = aiptrain("jobs", "wait", job_id, "--backend", "ray", "--timeout", "120")
    assert waited.returncode == 11, waited.stderr
    assert "Job cancelled." in log_text(on_cluster, job_id)
    wait_until(lambda: tokened_processes(token) == [], "every replica process to be gone", timeout=60)
    # Each replica's TMPDIR was its own (the restarted worker kept its own) and went with it.
    temp_dirs = set(re.findall(r"\] temporary directory (\S+)", log_text(on_cluster, job_id)))
    assert len(temp_dirs) == 2 and all(Path(path).name.startswith("aiptrain-job-") for path in temp_dirs)
    wait_until(lambda: not any(Path(path).exists() for path in temp_dirs), "the replicas' TMPDIRs to go", 60)
    again = aiptrain("jobs", "cancel", job_id, "--backend", "ray")
    assert again.returncode == 1 and "already ended (CANCELLED)" in again.stderr


def test_a_replica_larger_than_every_node_is_refused_at_submit_and_nothing_reaches_the_cluster(on_cluster,
                                                                                                digits_dir,
                                                                                                isolated_environment):
    from ray.util.state import list_placement_groups

    job_id = "ray_never_fits"
    result = aiptrain(*submit_args(job_id, digits_dir, workers=0, master="n1-highcpu-96", scale=None))
    assert result.returncode == 2, result.stderr
    assert "the replica master-replica-0: 96 CPU, 80.47 GiB (n1-highcpu-96) is larger than any node" in result.stderr
    assert ": 4 CPU, 14.9 GiB" in result.stderr  # the nodes, with their sizes
    assert "hint: pass --ray-resource-scale 0.04" in result.stderr
    # Refused before the trainer was packaged or staged.
    assert not list((isolated_environment / "storage").rglob("*.tar.gz"))
    assert job_id not in {job.submission_id for job in backend(on_cluster).client.list_jobs()}
    assert not [group for group in list_placement_groups(address=on_cluster.address, detail=True)
                if job_id in (group.name or "")]


def test_an_address_where_no_ray_cluster_answers_exits_2_with_a_hint(digits_dir, tmp_path):
    from aiptrain._replicas.ports import free_ports

    nobody = f"http://127.0.0.1:{free_ports(1)[0]}"
    result = aiptrain(*submit_args("ray_nowhere", digits_dir, flags=("--ray-address", nobody)))
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Ray Jobs API at {nobody}" in result.stderr
    assert "hint:" in result.stderr and "ray start --head" in result.stderr
    gcs_port = aiptrain("jobs", "describe", "x", "--backend", "ray", "--ray-address", "127.0.0.1:6379")
    assert gcs_port.returncode == 2 and "the GCS port of a Ray cluster, not its Jobs API" in gcs_port.stderr
    missing = aiptrain("jobs", "list", "--backend", "ray")
    assert missing.returncode == 2 and "needs the address of a Ray cluster" in missing.stderr
