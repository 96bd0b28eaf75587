"""Row 12: gs:// from a trainer's own code on the local backend, against the local disk.

One TensorFlow process per row pair does both sides, alternating: through the job's storage
endpoint (`gs://`, HTTPS through the proxy to the local store) and the very same folder by its
path. The endpoint runs as it does for a job (`ReplicaStorage`, the replicas' environment), and
the process is started as a replica is (the replica launcher, `start_process`).

12a/12b  TensorFlow 2.x (the bench's own) writing, then reading, a 64 MiB file.
12c/12d  The same on runtime 1.15's own environment (TensorFlow 1.15.5 on Python 3.7, built into
         the scratch space), whose libcurl trusts only the system's CA bundle.
12e/12f  TensorFlow 2.x writing, then reading, 100 files of 1 kB each (CSV shards, summaries):
         milliseconds per file, where a request's fixed costs show.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench.context import BenchContext
from bench.environment import PYTHON, SCRIPTS, BenchError, isolated_env
from bench.harness import Goal, RowResult, Stats, ratio_min

RUNS = 7
SMALL_RUNS = 5
SIZE = 64 * 1024 * 1024
SMALL_FILES = 100
BUCKET = "bench-bucket"
SCRIPT = SCRIPTS / "gcs_endpoint_io.py"
# The goals: reads at 0.8x the disk, writes at 0.5x (see docs/benchmarks.md for why writes cannot
# pass 0.5x through TensorFlow's GCS client: it writes a local temporary file first).
_GOALS = {"read": ratio_min(0.8), "write": ratio_min(0.5)}
_NOTES = ("1 MB = 10^6 bytes. One TensorFlow process, sides alternating, the first pair dropped. Through the "
          "endpoint each request is a new connection, a CONNECT and a TLS handshake (TensorFlow's libcurl keeps "
          "no connection), then the Cloud Storage API served by the job's supervisor from the local store; "
          "TensorFlow reads in blocks of GCS_READ_CACHE_BLOCK_SIZE_MB (16, set by the endpoint) and writes a "
          "local temporary file that it uploads in one request when the file is closed.")


def _measure(ctx: BenchContext, python: Path, mode: str, amount: int, runs: int, home: Path,
             folder: Path) -> tuple[dict[str, dict[str, list[float]]], str]:
    from aiptrain._gcs_endpoint.service import ReplicaStorage
    from aiptrain._replicas.processes import start_process

    argv = [str(python), str(SCRIPT), mode, str(folder), f"gs://{BUCKET}/{folder.name}", str(amount), str(runs)]
    with ReplicaStorage(home, home / "storage") as storage:
        env = isolated_env(home)
        env.update(storage.environment(env))
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        process = start_process(argv, env=env, cwd=home)
        ctx.cleanup.track(process.popen)
        out, err = process.popen.communicate(timeout=1800)
    if process.popen.returncode != 0:
        raise BenchError(f"{SCRIPT.name} {mode} on {python} failed: {err.decode(errors='replace')[-2000:]}")
    samples: dict[str, dict[str, list[float]]] = json.loads(out.decode().strip().splitlines()[-1])
    return samples, ctx.show(argv, home=True)


def _runtime_1_15_python(ctx: BenchContext) -> Path:
    from aiptrain._environments.resolution import resolve_version
    from aiptrain._environments.store import EnvironmentStore
    from aiptrain._job.catalog import load_catalog

    resolution = resolve_version("1.15", load_catalog(), python="3.7")
    if resolution is None or resolution.interpreter is None:
        raise BenchError("runtime 1.15 needs a Python 3.7 to build its environment")
    environment = EnvironmentStore(ctx.scratch / "envs-gcs").ensure(resolution, progress=lambda _line: None)
    return Path(environment.python)


def run(ctx: BenchContext) -> list[RowResult]:
    rows: list[RowResult] = []
    sides = [("12a", "12b", "TensorFlow 2.x", PYTHON), ("12c", "12d", "TensorFlow 1.15 (runtime 1.15)", None)]
    for write_id, read_id, label, python in sides:
        home = ctx.cleanup.new_home(f"gcs-endpoint-{write_id}")
        folder = home / "storage" / BUCKET / "io"
        folder.mkdir(parents=True)
        titles = {operation: f"{label}: `tf.io.gfile` {operation} of a 64 MiB file via gs:// on the local backend, "
                             "throughput (higher is better)" for operation in _GOALS}
        try:  # one TensorFlow failing leaves the other's rows measured
            samples, command = _measure(ctx, python or _runtime_1_15_python(ctx), "big", SIZE, ctx.runs(RUNS),
                                        home, folder)
        except BenchError as error:
            rows += [RowResult(row_id=row_id, group="gcs-endpoint", title=titles[operation], unit="MB/s",
                               status="failed", notes=f"Measurement failed: {error}")
                     for row_id, operation in ((write_id, "write"), (read_id, "read"))]
            continue
        for row_id, operation in ((write_id, "write"), (read_id, "read")):
            rows.append(_row(row_id, operation, samples[operation], titles[operation], "MB/s", command,
                             _GOALS[operation]))
    home = ctx.cleanup.new_home("gcs-endpoint-12e")
    folder = home / "storage" / BUCKET / "small"
    folder.mkdir(parents=True)
    samples, command = _measure(ctx, PYTHON, "small", SMALL_FILES, ctx.runs(SMALL_RUNS), home, folder)
    for row_id, operation in (("12e", "write"), ("12f", "read")):
        rows.append(_row(row_id, operation, samples[operation],
                         f"TensorFlow 2.x: `tf.io.gfile` {operation} of {SMALL_FILES} files of 1 kB via gs:// on the "
                         "local backend, time per file (lower is better)", "ms", command, None))
    return rows


def _row(row_id: str, operation: str, sides: dict[str, list[float]], title: str, unit: str, command: str,
         goal: Goal | None) -> RowResult:
    through, local = sides["gs"], sides["local"]
    return RowResult(
        row_id=row_id, group="gcs-endpoint", unit=unit, title=title,
        subject=Stats.of(through), anchor=Stats.of(local), goal=goal,
        ratio=statistics.median(g / p for g, p in zip(through, local, strict=True)), ratio_method="pairs",
        commands=[command], anchor_label="the same folder by its local path", notes=_NOTES,
    )
