"""Row 13: the Ray backend on a two-node Ray cluster started on this machine for the group.

13a: submit-to-SUCCEEDED of a no-op job of 2 replicas (chief + 1 worker, bench/trainers/noop)
through `aiptrain jobs submit training --backend ray --stream-logs`, against `ray job submit` of
bench/scripts/ray_noop_job.py, a hand-written script doing the same on the same cluster (placement
group of two bundles, an actor per bundle running the trainer as a subprocess). Both commands
return when the job has ended. Goal: at most 1.3x.

13c: submit-to-SUCCEEDED of a no-op job of 4 replicas (master, 2 workers, a parameter server; two
per node) on runtime 1.15, each replica in the runtime's own environment (TensorFlow 1.15.5 on
Python 3.7) that aiptrain built on its node, already built (warm): against `ray job submit` of the
same processes (4 actors each running the trainer with that environment's Python). Goal: 1.3x.

13d: the same job on fresh nodes (the nodes' aiptrain caches emptied before each run): the
environment is built on both nodes (from uv's cache on this machine, so no wheel is downloaded)
before the replicas start; against the same job warm. No goal: it says what the first job pays.

13b: trainer_template steps/s as chief + 1 worker on Ray, against the same job on the local
backend, alternated; no goal (on one 2-core machine both run the same processes, so this is the
cost of the Ray plumbing, not of a network).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aiptrain._environments.store import EnvironmentStore
from bench.context import BenchContext
from bench.environment import REPO, aiptrain_command, isolated_env, run_checked, time_command
from bench.harness import RowResult, alternate, paired_row, ratio_max
from bench.rows.training import make_data, steps_per_second

RUNS = 3
WARM_RUNS = 5  # 13c: the two sides differ by a few seconds of 12; a shared machine needs more pairs
TRAIN_STEPS = 600
QUICK_TRAIN_STEPS = 300
_ids = itertools.count(1)


def _submit(ctx: BenchContext, backend: str, project: str, job_id: str, extra: list[str],
            user_args: list[str], workers: int = 1, runtime: str = "2.11") -> list[str]:
    return [*aiptrain_command(), "jobs", "submit", "training", job_id, "--backend", backend, "--region",
            "us-central1", "--package-path", str(ctx.package_path(project)), "--module-name", "trainer.task",
            "--runtime-version", runtime, "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
            "--worker-machine-type", "n1-standard-4", "--worker-count", str(workers), *extra, "--stream-logs",
            "--", *user_args]


def run(ctx: BenchContext) -> list[RowResult]:
    from tests.backends.ray.cluster import VENV_BIN, node_environment, start_cluster

    # A short path: Ray's Unix sockets live under it, and their paths are limited to 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="aipr-"))
    cluster = start_cluster(temp_dir)
    try:
        env = isolated_env(ctx.cleanup.new_home("ray"), {"AIPTRAIN_RAY_ADDRESS": cluster.address,
                                                              "AIPTRAIN_RAY_RUNTIME_PACKAGES": "cluster"})
        scale = ["--ray-resource-scale", "0.25"]

        def aiptrain_noop() -> float:
            argv = _submit(ctx, "ray", "noop", f"bench_ray_noop_{next(_ids)}", scale, [])
            return time_command(argv, env=env, timeout=300)

        def ray_noop() -> float:
            argv = [str(VENV_BIN / "ray"), "job", "submit", "--address", cluster.address, "--submission-id",
                    f"bench_raw_noop_{next(_ids)}", "--working-dir", str(ctx.project("noop")), "--",
                    "python", str(REPO / "bench" / "scripts" / "ray_noop_job.py")]
            return time_command(argv, env=node_environment(), timeout=300)

        noop = alternate(aiptrain_noop, ray_noop, ctx.runs(RUNS))
        noop_row = paired_row(RowResult(
            row_id="13a", group="ray", title="No-op job of 2 replicas on a 2-node Ray cluster, submit to SUCCEEDED",
            unit="s", goal=ratio_max(1.3),
            commands=[ctx.show(_submit(ctx, "ray", "noop", "bench_ray_noop_N", scale, []), home=True)],
            anchor_commands=["ray job submit --address $RAY --submission-id bench_raw_noop_N --working-dir "
                             "$SCRATCH/projects/noop -- python bench/scripts/ray_noop_job.py"],
            anchor_label="`ray job submit` of the same work written by hand",
            notes="Both wait for the end of the job. aiptrain also builds and stages the sdist, uploads it and "
                  "aiptrain as the Ray job's working_dir and py_modules, installs it on each replica's node and "
                  "probes ports; its replicas run with the cluster's Python (AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster).",
        ), noop)

        rows = [noop_row, *_runtime_env_rows(ctx, cluster)]

        data = make_data(ctx, env)
        steps = QUICK_TRAIN_STEPS if ctx.quick else TRAIN_STEPS
        user_args = ["--train-files", f"{data}/train-*.csv", "--eval-files", f"{data}/eval-*.csv",
                     "--train-steps", str(steps), "--log-steps", "100", "--checkpoint-steps", str(10 * steps),
                     "--throttle-secs", "100000"]

        def rate(backend: str, extra: list[str]) -> float:
            job_id = f"bench_{backend}_train_{next(_ids)}"
            completed = run_checked(_submit(ctx, backend, "template", job_id,
                                            [*extra, "--job-dir", f"gs://bench-ray/{job_id}"], user_args),
                                    env=env, timeout=900)
            return steps_per_second(completed.stdout + completed.stderr)

        training = alternate(lambda: rate("ray", scale), lambda: rate("local", []), ctx.runs(2), warmup=0)
        training_row = paired_row(RowResult(
            row_id="13b", group="ray", title="trainer_template chief + 1 worker on Ray, steps/s (higher is better)",
            unit="steps/s",
            commands=[ctx.show(_submit(ctx, "ray", "template", "JOB", [*scale, "--job-dir", "gs://bench-ray/JOB"],
                                       ["…"]), home=True)],
            anchor_commands=[ctx.show(_submit(ctx, "local", "template", "JOB", ["--job-dir", "gs://bench-ray/JOB"],
                                              ["…"]), home=True)],
            anchor_label="the same job on the local backend",
            notes=f"{steps} steps; per run the median steps_per_sec window after the first. No goal: for reference.",
        ), training)
        return [rows[0], training_row, *rows[1:]]  # in the order of their ids
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)



RUNTIME_ENV_FLAGS = ["--python-version", "3.7", "--parameter-server-machine-type", "n1-standard-4",
                     "--parameter-server-count", "1", "--ray-resource-scale", "0.5"]


def _runtime_env_rows(ctx: BenchContext, cluster: Any) -> list[RowResult]:
    """13c and 13d: 4 replicas in runtime 1.15's environment built on the nodes, warm and cold."""
    from tests.backends.ray.cluster import VENV_BIN, node_environment

    # The node builder (the default), not the cluster's Python; two workers + the parameter server.
    env = isolated_env(ctx.cleanup.new_home("ray-envs"), {"AIPTRAIN_RAY_ADDRESS": cluster.address})

    def submit(job_id: str) -> list[str]:
        return _submit(ctx, "ray", "noop", job_id, RUNTIME_ENV_FLAGS, [], workers=2, runtime="1.15")

    def aiptrain_job() -> float:
        return time_command(submit(f"bench_ray_env_{next(_ids)}"), env=env, timeout=600)

    build_seconds: list[float] = []  # what each cold build took on its node, from the builder's record

    def cold_job() -> float:
        for cache in cluster.cache_dirs:
            shutil.rmtree(cache, ignore_errors=True)  # a fresh node: no environment, no installed package
        elapsed = aiptrain_job()
        build_seconds.extend(build["seconds"] for cache in cluster.cache_dirs
                             for build in EnvironmentStore(cache / "envs").builds())
        return elapsed

    aiptrain_job()  # builds the environment on both nodes, so that the anchor has one to run
    key = next(build["key"] for build in EnvironmentStore(cluster.cache_dirs[0] / "envs").builds())
    anchor_argv = [str(VENV_BIN / "ray"), "job", "submit", "--address", cluster.address, "--submission-id",
                   "bench_raw_env_N", "--working-dir", str(ctx.project("noop")), "--", "python",
                   str(REPO / "bench" / "scripts" / "ray_noop_job.py"), "--replicas", "4", "--scale", "0.5",
                   "--env-key", key]

    def ray_job() -> float:
        argv = [arg if arg != "bench_raw_env_N" else f"bench_raw_env_{next(_ids)}" for arg in anchor_argv]
        return time_command(argv, env=node_environment(), timeout=300)

    warm = alternate(aiptrain_job, ray_job, ctx.runs(WARM_RUNS))
    shown = ctx.show(submit("bench_ray_env_N"), home=True)
    warm_row = paired_row(RowResult(
        row_id="13c", group="ray", title="No-op job of 4 replicas (2 per node) in runtime 1.15's environment built "
                                         "on the nodes, warm, submit to SUCCEEDED",
        unit="s", goal=ratio_max(1.3), commands=[shown],
        anchor_commands=["ray job submit --address $RAY --submission-id bench_raw_env_N --working-dir "
                         "$SCRATCH/projects/noop -- python bench/scripts/ray_noop_job.py --replicas 4 --scale 0.5 "
                         "--env-key KEY"],
        anchor_label="`ray job submit` of the same 4 processes, each with the environment's Python",
        notes="TensorFlow 1.15.5 on Python 3.7 (the cluster runs 3.11), the environment found in each node's cache "
              "(AIPTRAIN_RAY_CACHE_DIR). aiptrain also stages the sdist, resolves the runtime on each node (probing "
              "its interpreters) and installs the package there (from the node's install cache after the first job).",
    ), warm)
    cold = alternate(cold_job, aiptrain_job, ctx.runs(2), warmup=0)
    cold_row = paired_row(RowResult(
        row_id="13d", group="ray", title="The same job on fresh nodes (environment built on both), submit to SUCCEEDED",
        unit="s", commands=[f"(empty each node's AIPTRAIN_RAY_CACHE_DIR) {shown}"], anchor_commands=[shown],
        anchor_label="the same job with the environments built (13c)",
        notes="Both nodes build runtime 1.15's environment at once (one build per node, uv linking from this "
              "machine's uv cache: no wheel is downloaded; a node that must download TensorFlow 1.15.5 and its "
              "packages pays that too). The builds themselves took "
              + ", ".join(f"{seconds:g}" for seconds in build_seconds)
              + " s (the builder's record on each node). No goal: what the first job on a node costs.",
    ), cold)
    return [warm_row, cold_row]
