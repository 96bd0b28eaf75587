"""Row 10: gs:// from a trainer's own code on the local backend, against the local disk.

10a/10b  TensorFlow (`tf.io.gfile.GFile`) writing, then reading, a 64 MiB file: through the job's
         storage endpoint (`gs://`, HTTPS through the proxy to the local store) against the very
         same folder by its path. One TensorFlow process does both sides, alternating, with the
         endpoint running as it does for a job (`ReplicaStorage` and the replicas' environment).
"""

from __future__ import annotations

import json
import statistics
import subprocess

from bench.context import BenchContext
from bench.environment import PYTHON, SCRIPTS, BenchError, isolated_env
from bench.harness import RowResult, Stats

RUNS = 7
SIZE = 64 * 1024 * 1024
BUCKET = "bench-bucket"


def run(ctx: BenchContext) -> list[RowResult]:
    from aiptrain.replicas.gcs_endpoint.service import ReplicaStorage

    home = ctx.cleanup.new_home("gcs-endpoint")
    folder = home / "storage" / BUCKET / "io"
    folder.mkdir(parents=True)
    runs = ctx.runs(RUNS)
    script = SCRIPTS / "gcs_endpoint_io.py"
    argv = [str(PYTHON), str(script), str(folder), f"gs://{BUCKET}/io", str(SIZE), str(runs)]
    with ReplicaStorage(home, home / "storage") as storage:
        env = isolated_env(home)
        env.update(storage.environment(env))
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if result.returncode != 0:
        raise BenchError(f"{script.name} failed: {result.stderr[-2000:]}")
    samples = json.loads(result.stdout.strip().splitlines()[-1])
    rows = []
    for row_id, operation in (("12a", "write"), ("12b", "read")):
        through, local = samples[operation]["gs"], samples[operation]["local"]
        rows.append(RowResult(
            row_id=row_id, group="gcs-endpoint", unit="MB/s",
            title=f"`tf.io.gfile` {operation} of a 64 MiB file via gs:// on the local backend, throughput "
                  "(higher is better)",
            subject=Stats.of(through), anchor=Stats.of(local),
            ratio=statistics.median(g / p for g, p in zip(through, local, strict=True)), ratio_method="pairs",
            commands=[ctx.show(argv, home=True)], anchor_label="the same folder by its local path",
            notes="1 MB = 10^6 bytes. One TensorFlow process, sides alternating; through the endpoint every "
                  "request is a CONNECT and a TLS handshake (TensorFlow's libcurl keeps no connection), then "
                  "the Cloud Storage API served by the job's supervisor from the local store.",
        ))
    return rows
