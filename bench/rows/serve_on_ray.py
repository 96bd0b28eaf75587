"""Row 21: `aiptrain local serve --backend ray`, the server whose jobs run on a Ray cluster (two
nodes started on this machine for the group, as for row 13).

21a: submit-to-SUCCEEDED of the no-op job of row 13a (chief + 1 worker) created through the server
(`aiptrain --backend mlv1 --api-endpoint SERVER jobs submit training --stream-logs`: upload, create,
stream to the end), against the same command with `--backend ray` (the job submitted to the
cluster directly). Alternated. Goal: at most 1.2x.

21b: the server's resident set (VmRSS) with 100 jobs queued on Ray (created by 10 clients at once,
one job taken onto the cluster at a time), against the same server idle before any job. Goal: at
most 300 MB.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.context import BenchContext
from bench.environment import BenchError, aiptrain_command, isolated_env, start_local_serve, time_command
from bench.harness import RowResult, Stats, alternate, paired_row, ratio_max, value_max

RUNS = 3
QUEUED_JOBS = 100
CLIENTS = 10
PROJECT = "bench-team"
_ids = itertools.count(1)


def _submit(ctx: BenchContext, job_id: str, backend: list[str]) -> list[str]:
    return [*aiptrain_command(), *backend, "jobs", "submit", "training", job_id, "--region", "us-central1",
            "--package-path", str(ctx.package_path("noop")), "--module-name", "trainer.task",
            "--runtime-version", "2.11", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
            "--worker-machine-type", "n1-standard-4", "--worker-count", "1", "--storage", "local",
            "--staging-bucket", "gs://bench-team", "--stream-logs"]


def _rss_megabytes(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for pid {pid}")


def run(ctx: BenchContext) -> list[RowResult]:
    from tests.backends.ray.cluster import start_cluster

    temp_dir = Path(tempfile.mkdtemp(prefix="aipr-"))  # short: Ray's socket paths are limited
    cluster = start_cluster(temp_dir)
    try:
        cluster_env = {"AIPTRAIN_RAY_ADDRESS": cluster.address, "AIPTRAIN_RAY_RUNTIME_PACKAGES": "cluster",
                       "AIPTRAIN_RAY_RESOURCE_SCALE": "0.25"}
        direct_env = isolated_env(ctx.cleanup.new_home("ray-direct"), cluster_env)
        server_home = ctx.cleanup.new_home("ray-served")
        server_env = isolated_env(server_home, cluster_env)
        url = start_local_serve(ctx.cleanup, server_env, server_home / "serve.log", "--backend", "ray",
                                "--no-grpc", "--no-proxy")
        server_pid = ctx.cleanup.processes[-1].pid  # the console script's own process: no wrapper
        client_env = isolated_env(server_home, {"AIPTRAIN_PROJECT": PROJECT})  # the server's token file
        served = ["--backend", "mlv1", "--api-endpoint", url]

        def through_server() -> float:
            return time_command(_submit(ctx, f"bench_served_{next(_ids)}", served), env=client_env, timeout=300)

        def direct() -> float:
            return time_command(_submit(ctx, f"bench_direct_{next(_ids)}", ["--backend", "ray"]), env=direct_env,
                                timeout=300)

        noop = alternate(through_server, direct, ctx.runs(RUNS))
        noop_row = paired_row(RowResult(
            row_id="21a", group="serve-on-ray", title="No-op job of 2 replicas through `local serve --backend ray`, "
            "submit to SUCCEEDED", unit="s", goal=ratio_max(1.2),
            commands=[ctx.show(_submit(ctx, "bench_served_N", [*served[:3], "$SERVER"]), home=True)],
            anchor_commands=[ctx.show(_submit(ctx, "bench_direct_N", ["--backend", "ray"]), home=True)],
            anchor_label="the same job submitted with `--backend ray`",
            notes="Both stream the job's log to its end. Through the server the job is stored, taken by the "
                  "server's relay, submitted to the cluster and its lines copied back, which the client reads.",
        ), noop)
        return [noop_row, _queued_memory(url, server_home, server_pid)]
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _queued_memory(url: str, home: Path, pid: int) -> RowResult:
    """21b: the server's VmRSS idle, then with QUEUED_JOBS jobs created by CLIENTS threads at once."""
    import json
    import urllib.request

    from aiptrain._paths import serve_token_path
    from aiptrain._storage.local import local_path_for

    idle = _rss_megabytes(pid)
    token = serve_token_path(int(url.rstrip("/").rsplit(":", 1)[1]), home).read_text().strip()
    package = "gs://bench-team/queued/trainer.tar.gz"
    staged = next((home / "storage" / "bench-team").rglob("*.tar.gz"))  # the no-op sdist row 21a uploaded
    target = local_path_for(package, home / "storage")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(staged, target)
    failures: list[str] = []

    def create(client: int) -> None:
        for index in range(QUEUED_JOBS // CLIENTS):
            body: dict[str, Any] = {"jobId": f"queued_{client}_{index}", "trainingInput": {
                "scaleTier": "BASIC", "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [package],
                "pythonModule": "trainer.task"}}
            request = urllib.request.Request(f"{url}v1/projects/{PROJECT}/jobs", data=json.dumps(body).encode(),
                                             headers={"Authorization": f"Bearer {token}",
                                                      "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    response.read()
            except Exception as error:
                failures.append(f"queued_{client}_{index}: {error}")

    threads = [threading.Thread(target=create, args=(client,)) for client in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    if failures:
        raise BenchError(f"{len(failures)} of {QUEUED_JOBS} creates failed: {failures[:3]}")
    samples = []
    for _ in range(5):  # while the relay takes and follows the first of them
        time.sleep(1)
        samples.append(_rss_megabytes(pid))
    row = RowResult(
        row_id="21b", group="serve-on-ray", title=f"Resident memory of `local serve --backend ray` with "
        f"{QUEUED_JOBS} jobs queued on Ray", unit="MB", goal=value_max(300, "MB"),
        subject=Stats.of(samples), anchor=Stats.of([idle]), ratio=max(samples) / idle, ratio_method="medians",
        commands=[f"{CLIENTS} threads x {QUEUED_JOBS // CLIENTS} POST {url}v1/projects/{PROJECT}/jobs; "
                  "grep VmRSS /proc/$SERVER_PID/status, once a second for 5 s"],
        anchor_commands=["grep VmRSS /proc/$SERVER_PID/status before the first job"],
        anchor_label="the same server, idle, before any job",
        notes="VmRSS of the server process (the jobs are rows of its store; one is taken onto the cluster at a "
              "time). The goal judges the median.")
    _cancel_all(url, token)
    return row


def _cancel_all(url: str, token: str) -> None:
    import json
    import urllib.request

    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    listing = urllib.request.Request(f"{url}v1/projects/{PROJECT}/jobs?pageSize=1000", headers=headers)
    with urllib.request.urlopen(listing, timeout=60) as response:
        jobs = json.loads(response.read()).get("jobs", [])
    for job in jobs:
        if job["state"] in ("QUEUED", "PREPARING", "RUNNING"):
            cancel = urllib.request.Request(f"{url}v1/projects/{PROJECT}/jobs/{job['jobId']}:cancel", data=b"{}",
                                            headers=headers)
            try:
                with urllib.request.urlopen(cancel, timeout=60) as response:
                    response.read()
            except Exception:  # ended meanwhile
                continue
    deadline = time.monotonic() + 60  # the one taken stops on the cluster: its end comes through the relay
    while time.monotonic() < deadline:
        with urllib.request.urlopen(listing, timeout=60) as response:
            states = [job["state"] for job in json.loads(response.read()).get("jobs", [])]
        if all(state in ("SUCCEEDED", "FAILED", "CANCELLED") for state in states):
            return
        time.sleep(0.5)
