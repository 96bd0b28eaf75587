"""Row 10: the Ray backend on a two-node Ray cluster started on this machine for the group.

10a: submit-to-SUCCEEDED of a no-op job of 2 replicas (chief + 1 worker, bench/trainers/noop)
through `aiptrain jobs submit training --backend ray --stream-logs`, against `ray job submit` of
bench/scripts/ray_noop_job.py, a hand-written script doing the same on the same cluster (placement
group of two bundles, an actor per bundle running the trainer as a subprocess). Both commands
return when the job has ended. Goal: at most 1.3x.

10b: trainer_template steps/s as chief + 1 worker on Ray, against the same job on the local
backend, alternated; no goal (on one 2-core machine both run the same processes, so this is the
cost of the Ray plumbing, not of a network).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path

from bench.context import BenchContext
from bench.environment import REPO, aiptrain_command, isolated_env, run_checked, time_command
from bench.harness import RowResult, alternate, paired_row, ratio_max
from bench.rows.training import make_data, steps_per_second

RUNS = 3
TRAIN_STEPS = 600
QUICK_TRAIN_STEPS = 300
_ids = itertools.count(1)


def _submit(ctx: BenchContext, backend: str, project: str, job_id: str, extra: list[str],
            user_args: list[str]) -> list[str]:
    return [*aiptrain_command(), "jobs", "submit", "training", job_id, "--backend", backend, "--region",
            "us-central1", "--package-path", str(ctx.package_path(project)), "--module-name", "trainer.task",
            "--runtime-version", "2.11", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
            "--worker-machine-type", "n1-standard-4", "--worker-count", "1", *extra, "--stream-logs",
            "--", *user_args]


def run(ctx: BenchContext) -> list[RowResult]:
    from tests.ray.cluster import VENV_BIN, node_environment, start_cluster

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
                  "aiptrain as the runtime environment, pip-installs it on each replica's node and probes ports.",
        ), noop)

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
        return [noop_row, training_row]
    finally:
        cluster.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)

