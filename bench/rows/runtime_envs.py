"""Row 10: runtime environments: building one, starting a job on one, installing a trainer with
its dependencies, and the disk an environment takes.

- 10a/10b: `aiptrain local envs build 2.11` into an empty envs directory, with an empty uv cache
  (cold: every wheel downloaded; reported, no goal) and with the cache the cold build filled
  (warm: what a second machine user or a CI re-run pays; goal <= 15 s).
- 10c: submit to "Job RUNNING." of a one-replica no-op job whose runtime environment is built,
  minus the same with AIPTRAIN_LOCAL_PYTHON (the path every job took before environments), per
  pair; goal <= +0.3 s.
- 10d: PREPARING to RUNNING of a job whose trainer declares install_requires (one the runtime
  has, one it has not), with its install already in the install cache; goal <= 0.5 s.
- 10e: the environment's files, and how much of them is its own (not hard links into uv's cache).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

from bench.context import BenchContext
from bench.environment import PYTHON, aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, Stats, alternate, value_max
from bench.rows.engine_overhead import service_marks

_job_numbers = itertools.count()
RUNTIME = "2.11"


def _build_seconds(ctx: BenchContext, label: str, uv_cache: Path) -> tuple[float, Path]:
    envs = ctx.scratch / f"envs-{label}"
    env = isolated_env(ctx.cleanup.new_home(f"envs-{label}"), {"UV_CACHE_DIR": str(uv_cache)}, runtime_envs=envs)
    started = time.perf_counter()
    result = run_checked([*aiptrain_command(), "local", "envs", "build", RUNTIME], env=env, timeout=1800)
    return time.perf_counter() - started, Path(result.stdout.strip())


def _submit_to_running(ctx: BenchContext, home: Path, env: dict[str, str], project: str, extra: list[str]) -> float:
    job_id = f"envs_{next(_job_numbers)}"
    submitted_at = time.time()
    run_checked([*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
                 str(ctx.package_path(project)), "--module-name", "trainer.task", "--region", "us-central1",
                 "--runtime-version", RUNTIME, *extra], env=env, timeout=600)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=600)
    marks = service_marks(home, job_id)
    return marks["Job RUNNING."] - submitted_at


def _preparing_seconds(home: Path, env: dict[str, str], ctx: BenchContext) -> float:
    job_id = f"deps_{next(_job_numbers)}"
    run_checked([*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
                 str(ctx.package_path("with_deps")), "--module-name", "trainer.task", "--region", "us-central1",
                 "--runtime-version", RUNTIME], env=env, timeout=600)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=600)
    marks = service_marks(home, job_id)
    return marks["Job RUNNING."] - marks["Job PREPARING."]


def _disk(env: dict[str, str]) -> dict[str, float]:
    listed = run_checked([*aiptrain_command(), "local", "envs", "list", "--format", "json"], env=env)
    row = json.loads(listed.stdout)[0]
    return {"size": row["sizeBytes"] / 1e6, "own": row["ownBytes"] / 1e6}


def run(ctx: BenchContext) -> list[RowResult]:
    rows = []
    uv_cache = ctx.scratch / "uv-cache"
    cold, _ = _build_seconds(ctx, "cold", uv_cache)
    warm = [_build_seconds(ctx, f"warm-{i}", uv_cache)[0] for i in range(ctx.runs(3))]
    build_command = ctx.show([*aiptrain_command(), "local", "envs", "build", RUNTIME], home=True,
                             env={"AIPTRAIN_ENVS_DIR": "$SCRATCH/envs-N", "UV_CACHE_DIR": "$SCRATCH/uv-cache"})
    rows.append(RowResult(
        row_id="10a", group="runtime-envs", unit="s", subject=Stats.of([cold]), commands=[build_command],
        title=f"Runtime environment build (runtime {RUNTIME}: TensorFlow 2.15.1 and the runtime packages), "
              "empty uv cache",
        notes="Every wheel downloaded from PyPI (about 330 MB); depends on the network. Reported, no goal.",
    ))
    rows.append(RowResult(
        row_id="10b", group="runtime-envs", unit="s", subject=Stats.of(warm), commands=[build_command],
        goal=value_max(15, "s"),
        title=f"Runtime environment build (runtime {RUNTIME}), uv cache filled by 10a",
        notes="A new envs directory each run, the uv cache of the cold build: resolution, then hard links "
              "from the cache into the new environment, then the atomic rename.",
    ))

    envs = ctx.scratch / "envs-warm-0"  # built by the first warm run
    home = ctx.cleanup.new_home("envs-start")
    with_env = isolated_env(home, {"UV_CACHE_DIR": str(uv_cache)}, runtime_envs=envs)
    today = isolated_env(home, {"UV_CACHE_DIR": str(uv_cache)})  # AIPTRAIN_LOCAL_PYTHON: the old path
    paired = alternate(lambda: _submit_to_running(ctx, home, with_env, "noop", []),
                       lambda: _submit_to_running(ctx, home, today, "noop", []), ctx.runs(7))
    differences = [s - a for s, a in zip(paired.subject.samples, paired.anchor.samples, strict=True)]
    rows.append(RowResult(
        row_id="10c", group="runtime-envs", unit="s", subject=Stats.of(differences), goal=value_max(0.3, "s"),
        title="Job start on a built runtime environment, minus the same job with AIPTRAIN_LOCAL_PYTHON "
              "(submit to RUNNING, per pair)",
        commands=[ctx.show([*aiptrain_command(), "jobs", "submit", "training", "envs_N", "--package-path",
                            ctx.package_path("noop"), "--module-name", "trainer.task", "--region", "us-central1",
                            "--runtime-version", RUNTIME], home=True)],
        anchor_commands=["the same with AIPTRAIN_LOCAL_PYTHON=" + ctx.show([PYTHON])],
        notes=f"Subject median {paired.subject.median:.3f} s, anchor median {paired.anchor.median:.3f} s "
              "(submit start to the job's \"Job RUNNING.\" line). One home, install cache warm on both sides.",
    ))

    deps_home = ctx.cleanup.new_home("envs-deps")
    deps_env = isolated_env(deps_home, {"UV_CACHE_DIR": str(uv_cache)}, runtime_envs=envs)
    _preparing_seconds(deps_home, deps_env, ctx)  # the first job resolves and installs with uv
    cached = [_preparing_seconds(deps_home, deps_env, ctx) for _ in range(ctx.runs(5))]
    rows.append(RowResult(
        row_id="10d", group="runtime-envs", unit="s", subject=Stats.of(cached), goal=value_max(0.5, "s"),
        title="Trainer install with its install_requires (pandas, tabulate), already in the install cache: "
              "PREPARING to RUNNING",
        commands=[ctx.show([*aiptrain_command(), "jobs", "submit", "training", "deps_N", "--package-path",
                            ctx.package_path("with_deps"), "--module-name", "trainer.task", "--region",
                            "us-central1", "--runtime-version", RUNTIME], home=True)],
        notes="After one job installed it (uv, constrained by the runtime's versions; pandas left to the "
              "runtime, tabulate added): the environment is found, the cached install copied into the "
              "job's site.",
    ))

    disk = _disk(with_env)
    rows.append(RowResult(
        row_id="10e", group="runtime-envs", unit="MB", subject=Stats.of([disk["own"]]),
        title="Disk per runtime environment beyond uv's cache (files not hard-linked elsewhere)",
        commands=[ctx.show([*aiptrain_command(), "local", "envs", "list"], home=True)],
        notes=f"The environment's files add up to {disk['size']:.0f} MB, of which {disk['own']:.1f} MB are its "
              "own; the rest are hard links into the uv cache (same file system). Reported, no goal."
              + ("" if os.environ.get("UV_LINK_MODE") is None else " UV_LINK_MODE was set for this run."),
    ))
    return rows
