"""Row 14: the runtime's day and the VM's metadata server: what each adds to a job.

- 14a: installing a trainer with its install_requires on runtime 1.15's own environment, resolved as
  of the runtime's day (2020-12-19: uv's --exclude-newer, the runtime's packages shown as installed),
  against the same install resolved against today's index (the job's label
  `aiptrain-resolve-as-of=today`); PREPARING to RUNNING of a job whose install cache is empty (a
  new home each run), the uv cache warm on both sides (one warm-up pair); goal <= 1.2x.
- 14b: a no-op job's RUNNING to its end with the job's metadata server (started before the replicas,
  stopped after them) minus the same job without it (AIPTRAIN_LOCAL_METADATA=off), per pair;
  goal <= +0.2 s.
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

from bench.context import BenchContext
from bench.environment import aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, Stats, alternate, paired_row, ratio_max, value_max
from bench.rows.engine_overhead import service_marks

RUNTIME = "1.15"
_numbers = itertools.count()


def _job(ctx: BenchContext, env: dict[str, str], home: Path, project: str, extra: list[str]) -> dict[str, float]:
    """Run one job to its end; its lifecycle marks."""
    job_id = f"era_{next(_numbers)}"
    run_checked([*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
                 str(ctx.package_path(project)), "--module-name", "trainer.task", "--region", "us-central1",
                 *extra], env=env, timeout=900)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=900)
    return service_marks(home, job_id)


def _install_seconds(ctx: BenchContext, envs: Path, labels: list[str]) -> float:
    """PREPARING to RUNNING of a with_deps job on runtime 1.15, in a new home (its install cache empty)."""
    home = ctx.cleanup.new_home(f"era-install-{next(_numbers)}")
    env = isolated_env(home, runtime_envs=envs)
    marks = _job(ctx, env, home, "with_deps", ["--runtime-version", RUNTIME, "--python-version", "3.7", *labels])
    return marks["Job RUNNING."] - marks["Job PREPARING."]


def _running_seconds(ctx: BenchContext, home: Path, metadata: str) -> float:
    env = isolated_env(home, {"AIPTRAIN_LOCAL_METADATA": metadata})
    marks = _job(ctx, env, home, "noop", ["--runtime-version", "2.11"])
    return marks["Job completed successfully."] - marks["Job RUNNING."]


def run(ctx: BenchContext) -> list[RowResult]:
    envs = ctx.scratch / "era-envs"  # built with the machine's uv cache, which the build fills
    build_env = isolated_env(ctx.cleanup.new_home("era-build"), runtime_envs=envs)
    run_checked([*aiptrain_command(), "local", "envs", "build", RUNTIME, "--python-version", "3.7"], env=build_env,
                timeout=3600)
    today = ["--labels", "aiptrain-resolve-as-of=today"]
    paired = alternate(lambda: _install_seconds(ctx, envs, []), lambda: _install_seconds(ctx, envs, today),
                       ctx.runs(7))
    command = [*aiptrain_command(), "jobs", "submit", "training", "era_N", "--package-path",
               ctx.package_path("with_deps"), "--module-name", "trainer.task", "--region", "us-central1",
               "--runtime-version", RUNTIME, "--python-version", "3.7"]
    install = paired_row(RowResult(
        row_id="14a", group="era", unit="s", goal=ratio_max(1.2),
        title="Trainer install (pandas left to the runtime, tabulate added) resolved as of runtime 1.15's day, "
              "against today's resolution: PREPARING to RUNNING, install cache empty, uv cache warm",
        commands=[ctx.show(command, home=True)],
        anchor_commands=[ctx.show([*command, *today], home=True)],
        anchor_label="the same install against today's index (aiptrain-resolve-as-of=today)",
        notes="A new home per job, so every job installs; the runtime environment built once and the uv cache filled "
              "by one warm-up pair. As of 2020-12-19 tabulate resolves to 0.8.7, today to its newest release; "
              "pandas is the runtime's 0.24.2 either way (already satisfied).",
    ), paired)

    home = ctx.cleanup.new_home("era-metadata")
    started = alternate(lambda: _running_seconds(ctx, home, "on"), lambda: _running_seconds(ctx, home, "off"),
                        ctx.runs(9))
    differences = [s - a for s, a in zip(started.subject.samples, started.anchor.samples, strict=True)]
    noop = [*aiptrain_command(), "jobs", "submit", "training", "era_N", "--package-path", ctx.package_path("noop"),
            "--module-name", "trainer.task", "--region", "us-central1", "--runtime-version", "2.11"]
    metadata = RowResult(
        row_id="14b", group="era", unit="s", subject=Stats.of(differences), goal=value_max(0.2, "s"),
        title="A job with the VM's metadata server minus the same job without it (RUNNING to the end of a "
              "no-op job, per pair)",
        commands=[ctx.show(noop, home=True)],
        anchor_commands=[ctx.show(noop, home=True, env={"AIPTRAIN_LOCAL_METADATA": "off"})],
        notes=f"Subject median {started.subject.median:.3f} s, anchor median {started.anchor.median:.3f} s "
              f"(median of the differences {statistics.median(differences):+.3f} s). One home; the trainer runs in "
              "this interpreter (AIPTRAIN_LOCAL_PYTHON); the server starts before the replicas and stops after them.",
    )
    return [install, metadata]
