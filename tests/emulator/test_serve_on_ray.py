"""`aiptrain local serve --backend ray` on the suite's two-node Ray cluster, driven by Google's clients.

The server is started as a user starts it (the command line, its token file), the jobs are created
with googleapiclient from the static discovery documents, and what they did is read back from the
server (entries:list), from the cluster (Ray's Jobs API) and from the machine (the processes left).
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from aiptrain._replicas.processes import tokened_processes
from tests.backends.ray.cluster import RayCluster
from tests.fixtures.emulator import TERMINAL, Emulator, error_of, start_ray_server, wait_until

REPO = Path(__file__).resolve().parents[2]
RAY_TRAINER = REPO / "tests" / "backends" / "ray" / "trainers" / "raytrainer"
HP_TRAINER = REPO / "tests" / "tuning" / "trainers" / "hptrainer"
PROJECT = "team-project"
PACKAGE = "gs://team-bucket/packages/raytrainer-0.1.tar.gz"
HP_PACKAGE = "gs://team-bucket/packages/hptrainer-0.1.tar.gz"
VERTEX_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest"
JOB_TIMEOUT = 240.0
NODE = re.compile(r"^(\S+) runs on node \S+ \((\w+)\)")

PRIMARY_STEP = re.compile(r"^\[(chief|master):0\] step \d+$")

pytestmark = pytest.mark.ray_cluster


def stage_packages(server: Emulator, build_dir: Path) -> None:
    from aiptrain._packaging import build_package

    for source, uri in ((RAY_TRAINER, PACKAGE), (HP_TRAINER, HP_PACKAGE)):
        server.stage(build_package(source, cache_dir=build_dir).path, uri)


def client(api: str, version: str, server: Emulator) -> Any:
    return discovery.build(api, version, static_discovery=True, cache_discovery=False,
                           credentials=server.credentials(), client_options={"api_endpoint": server.url})


def ml_body(job_id: str, *args: str, **training_input: Any) -> dict[str, Any]:
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [PACKAGE],
        "pythonModule": "raytrainer.task", "args": list(args), **training_input}}


def ml_job(ml: Any, job_id: str, project: str = PROJECT) -> dict[str, Any]:
    job: dict[str, Any] = ml.get(name=f"projects/{project}/jobs/{job_id}").execute()
    return job


def ended(ml: Any, job_id: str, project: str = PROJECT) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        job = ml_job(ml, job_id, project)
        return job if job["state"] in TERMINAL else None

    result: dict[str, Any] = wait_until(done, timeout=JOB_TIMEOUT)
    return result


def entries(server: Emulator, job_id: str, project: str = PROJECT) -> list[dict[str, Any]]:
    """Every log entry of the job, through Cloud Logging's entries:list, page by page."""
    logging = client("logging", "v2", server).entries()
    found: list[dict[str, Any]] = []
    body: dict[str, Any] = {"resourceNames": [f"projects/{project}"], "orderBy": "timestamp asc", "pageSize": 1000,
                            "filter": f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"'}
    while True:
        page = logging.list(body=body).execute()
        found += page.get("entries", [])
        if not page.get("nextPageToken"):
            return found
        body["pageToken"] = page["nextPageToken"]


def texts(server: Emulator, job_id: str, project: str = PROJECT) -> list[str]:
    return [entry.get("textPayload", "") for entry in entries(server, job_id, project)]


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def primary_steps(lines: list[str]) -> int:
    """How many steps the primary replica has logged (its TF_CONFIG task is the chief or the master)."""
    return sum(bool(PRIMARY_STEP.match(line)) for line in lines)


def nodes_of(lines: list[str]) -> dict[str, str]:
    """Task name -> the node its replica ran on, from the driver's `X runs on node IP (ID)` lines."""
    return {match.group(1): match.group(2) for match in map(NODE.match, lines) if match}


@pytest.fixture(scope="module")
def server(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    running = start_ray_server(tmp_path_factory.mktemp("team-home"), ray_cluster.address)
    try:
        stage_packages(running, tmp_path_factory.mktemp("team-build"))
        yield running
    finally:
        running.stop()


@pytest.fixture
def ml(server: Emulator) -> Any:
    return jobs_api(server)


def jobs_api(server: Emulator) -> Any:
    """ml v1's jobs, on a connection of its own: the server closes one idle for 5 s, and httplib2
    does not retry a request whose body met the closed socket."""
    return client("ml", "v1", server).projects().jobs()


def test_a_custom_job_from_googleapiclient_runs_on_both_nodes_and_every_replica_logs_back(
        server: Emulator, ml: Any) -> None:
    body = ml_body("team_custom", "--steps", "2", "--step-seconds", "0.2", "--rendezvous",
                   scaleTier="CUSTOM", masterType="n1-standard-4", workerType="n1-standard-4", workerCount="2",
                   parameterServerType="n1-standard-4", parameterServerCount="1",
                   jobDir="gs://team-bucket/out/team_custom")
    created = ml.create(parent=f"projects/{PROJECT}", body=body).execute()
    assert created["state"] == "QUEUED"
    job = ended(ml, "team_custom")
    assert job["state"] == "SUCCEEDED", job
    assert {"startTime", "endTime"} <= set(job)
    found = entries(server, "team_custom")
    lines = [entry.get("textPayload", "") for entry in found]
    tasks = {"master-replica-0": "chief:0", "worker-replica-0": "worker:0", "worker-replica-1": "worker:1",
             "ps-replica-0": "ps:0"}
    for task, name in tasks.items():  # each replica's own lines, under its task name
        own = [e["textPayload"] for e in found if e["resource"]["labels"].get("task_name") == task]
        assert any(line.startswith(f"[{name}] started at ") for line in own), (task, own)
    assert set(nodes_of(lines)) == set(tasks)
    assert len(set(nodes_of(lines).values())) == 2  # spread over both nodes
    assert any(line.startswith("Submitted to the Ray cluster at ") for line in lines)
    assert "Job completed successfully." in lines
    assert sum(line.startswith("[chief:0] started at ") for line in lines) == 1  # copied once
    # The server's record is the job's: patched and filtered there, whatever Ray's metadata says.
    patched = jobs_api(server).patch(name=f"projects/{PROJECT}/jobs/team_custom", updateMask="labels",
                                     body={"labels": {"team": "vision"}, "etag": job["etag"]}).execute()
    assert patched["labels"] == {"team": "vision"}
    listed = jobs_api(server).list(parent=f"projects/{PROJECT}", filter="labels.team=vision AND state=SUCCEEDED",
                                   pageSize=100).execute()
    assert [found["jobId"] for found in listed["jobs"]] == ["team_custom"]


def test_a_replica_no_node_can_hold_is_refused_at_create_and_nothing_is_stored(server: Emulator, ml: Any) -> None:
    body = ml_body("team_too_big", scaleTier="CUSTOM", masterType="n1-highcpu-96")
    with pytest.raises(HttpError) as raised:
        ml.create(parent=f"projects/{PROJECT}", body=body).execute()
    assert raised.value.status_code == 400
    assert "node" in error_of(raised)["message"]
    with pytest.raises(HttpError) as missing:
        ml_job(ml, "team_too_big")
    assert missing.value.status_code == 404


def test_vertex_custom_jobs_run_on_the_cluster_as_vertex_ran_them(server: Emulator, ml: Any) -> None:
    jobs = client("aiplatform", "v1", server).projects().locations().customJobs()
    parent = f"projects/{PROJECT}/locations/us-central1"

    def pool(*args: str) -> dict[str, Any]:
        return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": {
            "executorImageUri": VERTEX_IMAGE, "packageUris": [PACKAGE], "pythonModule": "raytrainer.task",
            "args": list(args)}}

    steps = ("--steps", "6", "--step-seconds", "0.3")
    good = jobs.create(parent=parent, body={"displayName": "team vertex", "jobSpec": {
        "workerPoolSpecs": [pool(*steps), pool(*steps)]}}).execute()
    bad = jobs.create(parent=parent, body={"displayName": "team vertex bad", "jobSpec": {
        "workerPoolSpecs": [pool("--no-such-flag")]}}).execute()

    def final(name: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            job: dict[str, Any] = jobs.get(name=name).execute()
            return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED") else None

        result: dict[str, Any] = wait_until(done, timeout=JOB_TIMEOUT)
        return result

    assert final(good["name"])["state"] == "JOB_STATE_SUCCEEDED"
    numeric = good["name"].rsplit("/", 1)[1]
    found = entries(server, numeric)
    by_pool = {e["resource"]["labels"].get("task_name") for e in found if e["textPayload"].startswith("[")}
    assert by_pool == {"workerpool0-0", "workerpool1-0"}
    failed = final(bad["name"])
    assert failed["state"] == "JOB_STATE_FAILED"
    # Vertex's words, and no --job-dir argument for the trainer's argparse to choke on first.
    assert "The replica workerpool0-0 exited with a non-zero status of 2" in failed["error"]["message"], failed


def test_a_vertex_tuning_job_runs_its_trials_on_the_cluster(server: Emulator) -> None:
    jobs = client("aiplatform", "v1", server).projects().locations().hyperparameterTuningJobs()
    parent = f"projects/{PROJECT}/locations/us-central1"
    created = jobs.create(parent=parent, body={
        "displayName": "team tuning", "maxTrialCount": 2, "parallelTrialCount": 2,
        "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}], "algorithm": "GRID_SEARCH",
                      "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [0.1, 0.3]}}]},
        "trialJobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": {
                "executorImageUri": VERTEX_IMAGE, "packageUris": [HP_PACKAGE], "pythonModule": "hptrainer.task",
                "args": ["--steps", "2", "--step-seconds", "0.3", "--tag", "accuracy"]}}]}}).execute()

    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = jobs.get(name=created["name"]).execute()
        return job if job["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED") else None

    job: dict[str, Any] = wait_until(done, timeout=JOB_TIMEOUT)
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    trials = job["trials"]
    assert sorted(trial["parameters"][0]["value"] for trial in trials) == [0.1, 0.3]
    assert all(trial["state"] == "SUCCEEDED" and trial["finalMeasurement"]["metrics"] for trial in trials)
    numeric = created["name"].rsplit("/", 1)[1]
    trial_lines = {(e["labels"].get("trial_id"), e["resource"]["labels"].get("task_name"))
                   for e in entries(server, numeric) if e["textPayload"].startswith("trial ")}
    assert {trial_id for trial_id, _ in trial_lines} == {"1", "2"}, trial_lines


def test_cancel_stops_the_job_on_the_cluster_and_leaves_no_process_on_any_node(server: Emulator, ml: Any) -> None:
    body = ml_body("team_cancel", "--steps", "0", "--step-seconds", "0.3", scaleTier="CUSTOM",
                   masterType="n1-standard-4", workerType="n1-standard-4", workerCount="1")
    ml.create(parent=f"projects/{PROJECT}", body=body).execute()
    wait_until(lambda: "[worker:0] step 1" in texts(server, "team_cancel") or None, timeout=JOB_TIMEOUT)
    assert tokened_processes("aiptrain-ray/team_cancel")
    assert len(set(nodes_of(texts(server, "team_cancel")).values())) == 2
    jobs_api(server).cancel(name=f"projects/{PROJECT}/jobs/team_cancel", body={}).execute()
    assert ended(ml, "team_cancel")["state"] == "CANCELLED"
    wait_until(lambda: tokened_processes("aiptrain-ray/team_cancel") == [] or None, timeout=60)
    lines = texts(server, "team_cancel")
    assert lines.count("Cancel requested.") == 1 and "Job cancelled." in lines


def test_a_hundred_jobs_from_ten_clients_are_all_kept_once_and_taken_oldest_first(
        server: Emulator, ray_cluster: RayCluster) -> None:
    from aiptrain._backends.ray.client import connect

    project = "burst-project"
    refused: list[str] = []

    def create_ten(thread: int) -> None:
        jobs = client("ml", "v1", server).projects().jobs()  # httplib2 is one thread's
        for index in range(10):
            try:
                jobs.create(parent=f"projects/{project}", body=ml_body(
                    f"burst_{thread}_{index}", "--steps", "1", "--step-seconds", "0.1")).execute()
            except Exception as error:
                refused.append(f"burst_{thread}_{index}: {error}")

    threads = [threading.Thread(target=create_ten, args=(thread,)) for thread in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert refused == []
    listed = jobs_api(server).list(parent=f"projects/{project}", pageSize=1000).execute()["jobs"]
    assert sorted(job["jobId"] for job in listed) == sorted(f"burst_{t}_{i}" for t in range(10) for i in range(10))

    assert children_of(server.process.pid) == []  # a queue is rows of the store: no process per job here
    store = server.engine().store
    wait_until(lambda: sum(r.state.value == "SUCCEEDED" for r in store.list_jobs(project, limit=200)) >= 3 or None,
               timeout=JOB_TIMEOUT)
    records = sorted(store.list_jobs(project, limit=200), key=lambda record: record.key)
    taken = [record.key for record in records if record.runner_job]
    assert taken == [record.key for record in records[:len(taken)]]  # never one before an older one
    ml = jobs_api(server)
    for record in records:
        if record.state.value not in TERMINAL:
            ml.cancel(name=f"projects/{project}/jobs/{record.job_id}", body={}).execute()
    wait_until(lambda: all(r.state.value in TERMINAL for r in store.list_jobs(project, limit=200)) or None,
               timeout=JOB_TIMEOUT)
    final = store.list_jobs(project, limit=200)
    on_ray = [details.submission_id for details in connect(ray_cluster.address).list_jobs()
              if (details.submission_id or "").startswith(f"{project}.")]
    assert sorted(on_ray) == sorted(record.runner_job for record in final if record.runner_job)
    assert len(on_ray) == len(set(on_ray))
    succeeded = [r for r in final if r.state.value == "SUCCEEDED"]
    assert all(r.runner_job for r in succeeded) and len(succeeded) >= 3
    assert all(r.state.value == "CANCELLED" for r in final if not r.runner_job)


def killed_mid_job(home: Path, cluster: RayCluster, build_dir: Path, job_id: str, steps: int,
                   *args: str) -> Emulator:
    """A server on `home` that took the job `job_id` (the ray trainer with `args`) onto the cluster
    and was SIGKILLed once its primary had logged `steps` steps; the job runs on."""
    server = start_ray_server(home, cluster.address)
    try:
        stage_packages(server, build_dir)
        jobs_api(server).create(parent=f"projects/{PROJECT}", body=ml_body(job_id, *args)).execute()
        wait_until(lambda: primary_steps(texts(server, job_id)) >= steps or None, timeout=JOB_TIMEOUT)
    finally:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(30)
    return server


def test_a_server_killed_and_started_again_follows_its_running_job_to_the_end_with_every_line(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    home = tmp_path / "home"
    killed_mid_job(home, ray_cluster, tmp_path / "build", "team_survivor", 2, "--steps", "16", "--step-seconds", "0.5")
    time.sleep(1)  # lines keep coming on the cluster while nobody copies them
    second = start_ray_server(home, ray_cluster.address)
    try:
        ml = client("ml", "v1", second).projects().jobs()
        assert ml_job(ml, "team_survivor")["state"] in ("RUNNING", "SUCCEEDED")
        assert ended(ml, "team_survivor")["state"] == "SUCCEEDED"
        lines = texts(second, "team_survivor")
        steps = [line.split("] ", 1)[1] for line in lines if PRIMARY_STEP.match(line)]
        assert steps == [f"step {step}" for step in range(1, 17)]
        assert lines.count("Job completed successfully.") == 1
    finally:
        second.stop()


def test_a_cluster_that_stops_answering_fails_the_jobs_it_held_and_queued_ones_wait(
        ray_cluster: RayCluster, tmp_path: Path) -> None:
    from aiptrain._backends.ray.client import connect

    home = tmp_path / "home"
    first = killed_mid_job(home, ray_cluster, tmp_path / "build", "team_held", 1, "--steps", "0")
    held = first.engine().store.get(PROJECT, "team_held").runner_job
    assert held
    # The same home and a cluster that no longer answers (nothing listens at its address).
    second = start_ray_server(home, "http://127.0.0.1:9", env={"AIPTRAIN_SERVE_RAY_UNREACHABLE_SECONDS": "3"})
    try:
        assert "does not answer yet" in second.server_log()
        ml = client("ml", "v1", second).projects().jobs()
        jobs_api(second).create(parent=f"projects/{PROJECT}", body=ml_body("team_waiting", "--steps", "1")).execute()
        job = ended(ml, "team_held")
        assert job["state"] == "FAILED"
        assert "has not answered for 3 s" in job["errorMessage"]
        wait_until(lambda: any(line.startswith("Waiting for the Ray cluster at http://127.0.0.1:9")
                               for line in texts(second, "team_waiting")) or None, timeout=30)
        assert ml_job(ml, "team_waiting")["state"] == "QUEUED"
        jobs_api(second).cancel(name=f"projects/{PROJECT}/jobs/team_waiting", body={}).execute()
        assert ml_job(ml, "team_waiting")["state"] == "CANCELLED"
    finally:
        second.stop()
        connect(ray_cluster.address).stop_job(held)  # it ran on, on the cluster nobody heard from
    wait_until(lambda: tokened_processes("aiptrain-ray/team_held") == [] or None, timeout=60)
