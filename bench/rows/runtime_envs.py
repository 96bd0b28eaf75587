"""Row 10: runtime environments: building one per runtime family, starting a job on one,
installing a trainer with its dependencies, and the disk an environment takes.

- 10a/10b, 10f/10g, 10h/10i: `aiptrain local envs build` into an empty envs directory for three
  families: runtime 1.15 on Python 3.7 (TensorFlow 1.15.5), runtime 2.1 on Python 3.7
  (TensorFlow 2.1.4), and the fallback (runtime 1.15 where no Python 3.7 or 3.6 is found:
  TensorFlow 2.15.1 on Python 3.11); each with an empty uv cache (cold: every wheel downloaded;
  reported, no goal) and with the cache the cold build filled (warm: goal <= 15 s).
- 10c: submit to "Job RUNNING." of a one-replica no-op job on runtime 1.15's own environment,
  minus the same job on the fallback environment, per pair; goal <= +0.3 s.
- 10d: PREPARING to RUNNING of a job whose trainer declares install_requires (one the runtime
  has, one it has not), with its install already in the install cache; goal <= 0.5 s.
- 10e: runtime 1.15's environment files, and how much of them is its own (not hard links into
  uv's cache).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.context import BenchContext
from bench.environment import PYTHON, aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, Stats, alternate, value_max
from bench.rows.engine_overhead import service_marks

_job_numbers = itertools.count()
RUNTIME = "1.15"


@dataclass(frozen=True)
class Family:
    """A runtime family whose environment build is measured."""

    label: str
    runtime: str
    python: str
    title: str
    cold_id: str
    warm_id: str
    # Settings that make this family what it is (the fallback: no runtime Python to be found).
    settings: dict[str, str] = field(default_factory=dict)


def _fallback_settings(scratch: Path) -> dict[str, str]:
    """No Python 3.7 or 3.6 anywhere (no pyenv root, no uv Pythons, none on PATH, no downloads);
    the fallback's Python named explicitly, as a user would with AIPTRAIN_PYTHONS."""
    return {"PYENV_ROOT": str(scratch / "no-pyenv"), "UV_PYTHON_INSTALL_DIR": str(scratch / "no-uv-pythons"),
            "PATH": str(scratch / "empty-path"), "AIPTRAIN_PYTHON_DOWNLOADS": "never",
            "AIPTRAIN_PYTHONS": f"3.11={os.path.realpath(PYTHON)}"}


def _families(scratch: Path) -> list[Family]:
    return [
        Family("1.15", "1.15", "3.7", "runtime 1.15 on Python 3.7: TensorFlow 1.15.5 and its packages", "10a", "10b"),
        Family("2.1", "2.1", "3.7", "runtime 2.1 on Python 3.7: TensorFlow 2.1.4 and its packages", "10f", "10g"),
        Family("fallback", "1.15", "3.7", "the fallback, TensorFlow 2.15.1 on Python 3.11, for runtime 1.15 "
               "without its Python", "10h", "10i", _fallback_settings(scratch)),
    ]


def _build_seconds(ctx: BenchContext, family: Family, label: str, uv_cache: Path) -> tuple[float, Path]:
    envs = ctx.scratch / f"envs-{family.label}-{label}"
    env = isolated_env(ctx.cleanup.new_home(f"envs-{family.label}-{label}"),
                       {"UV_CACHE_DIR": str(uv_cache), **family.settings}, runtime_envs=envs)
    started = time.perf_counter()
    result = run_checked([*aiptrain_command(), "local", "envs", "build", family.runtime, "--python-version",
                          family.python], env=env, timeout=1800)
    return time.perf_counter() - started, Path(result.stdout.strip())


def _submit_to_running(ctx: BenchContext, home: Path, env: dict[str, str], project: str, extra: list[str]) -> float:
    job_id = f"envs_{next(_job_numbers)}"
    submitted_at = time.time()
    run_checked([*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
                 str(ctx.package_path(project)), "--module-name", "trainer.task", "--region", "us-central1",
                 "--runtime-version", RUNTIME, "--python-version", "3.7", *extra], env=env, timeout=600)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=600)
    marks = service_marks(home, job_id)
    return marks["Job RUNNING."] - submitted_at


def _preparing_seconds(home: Path, env: dict[str, str], ctx: BenchContext) -> float:
    job_id = f"deps_{next(_job_numbers)}"
    run_checked([*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
                 str(ctx.package_path("with_deps")), "--module-name", "trainer.task", "--region", "us-central1",
                 "--runtime-version", RUNTIME, "--python-version", "3.7"], env=env, timeout=600)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=600)
    marks = service_marks(home, job_id)
    return marks["Job RUNNING."] - marks["Job PREPARING."]


def _disk(env: dict[str, str]) -> dict[str, float]:
    listed = run_checked([*aiptrain_command(), "local", "envs", "list", "--format", "json"], env=env)
    row = json.loads(listed.stdout)[0]
    return {"size": row["sizeBytes"] / 1e6, "own": row["ownBytes"] / 1e6}


def run(ctx: BenchContext) -> list[RowResult]:
    rows = []
    built: dict[str, Path] = {}
    for family in _families(ctx.scratch):
        uv_cache = ctx.scratch / f"uv-cache-{family.label}"
        cold, _ = _build_seconds(ctx, family, "cold", uv_cache)
        warm = [_build_seconds(ctx, family, f"warm-{i}", uv_cache)[0] for i in range(ctx.runs(3))]
        built[family.label] = ctx.scratch / f"envs-{family.label}-warm-0"
        build_command = ctx.show([*aiptrain_command(), "local", "envs", "build", family.runtime, "--python-version",
                                  family.python], home=True,
                                 env={"AIPTRAIN_ENVS_DIR": "$SCRATCH/envs-N", "UV_CACHE_DIR": "$SCRATCH/uv-cache",
                                      **({"AIPTRAIN_PYTHONS": "3.11=…", "PYENV_ROOT": "(none)", "PATH": "(empty)"}
                                         if family.settings else {})})
        rows.append(RowResult(
            row_id=family.cold_id, group="runtime-envs", unit="s", subject=Stats.of([cold]), commands=[build_command],
            title=f"Runtime environment build ({family.title}), empty uv cache",
            notes="Every wheel downloaded from the package index; depends on the network. Reported, no goal.",
        ))
        rows.append(RowResult(
            row_id=family.warm_id, group="runtime-envs", unit="s", subject=Stats.of(warm), commands=[build_command],
            goal=value_max(15, "s"),
            title=f"Runtime environment build ({family.title}), uv cache filled by the cold build",
            notes="A new envs directory each run, the uv cache of the cold build: the interpreter found, "
                  "resolution, hard links from the cache into the new environment, then the atomic rename.",
        ))

    uv_cache = ctx.scratch / "uv-cache-1.15"
    home = ctx.cleanup.new_home("envs-start")
    exact = isolated_env(home, {"UV_CACHE_DIR": str(uv_cache)}, runtime_envs=built["1.15"])
    fallback = isolated_env(home, {"UV_CACHE_DIR": str(ctx.scratch / "uv-cache-fallback"),
                                   **_fallback_settings(ctx.scratch)}, runtime_envs=built["fallback"])
    paired = alternate(lambda: _submit_to_running(ctx, home, exact, "noop", []),
                       lambda: _submit_to_running(ctx, home, fallback, "noop", []), ctx.runs(7))
    differences = [s - a for s, a in zip(paired.subject.samples, paired.anchor.samples, strict=True)]
    rows.append(RowResult(
        row_id="10c", group="runtime-envs", unit="s", subject=Stats.of(differences), goal=value_max(0.3, "s"),
        title="Job start on runtime 1.15's own environment (TensorFlow 1.15.5, Python 3.7), minus the same job "
              "on the fallback (TensorFlow 2.15.1, Python 3.11) (submit to RUNNING, per pair)",
        commands=[ctx.show([*aiptrain_command(), "jobs", "submit", "training", "envs_N", "--package-path",
                            ctx.package_path("noop"), "--module-name", "trainer.task", "--region", "us-central1",
                            "--runtime-version", RUNTIME, "--python-version", "3.7"], home=True)],
        anchor_commands=["the same with no Python 3.7/3.6 to be found (the fallback environment)"],
        notes=f"Subject median {paired.subject.median:.3f} s, anchor median {paired.anchor.median:.3f} s "
              "(submit start to the job's \"Job RUNNING.\" line). One home, both environments built, install "
              "cache warm on both sides.",
    ))

    envs = built["1.15"]
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
              "runtime, tabulate added): the environment is found, the cached install linked into the "
              "job's site.",
    ))

    disk = _disk(exact)
    rows.append(RowResult(
        row_id="10e", group="runtime-envs", unit="MB", subject=Stats.of([disk["own"]]),
        title="Disk per runtime environment beyond uv's cache (runtime 1.15; files not hard-linked elsewhere)",
        commands=[ctx.show([*aiptrain_command(), "local", "envs", "list"], home=True)],
        notes=f"The environment's files add up to {disk['size']:.0f} MB, of which {disk['own']:.1f} MB are its "
              "own; the rest are hard links into the uv cache (same file system). Reported, no goal."
              + ("" if os.environ.get("UV_LINK_MODE") is None else " UV_LINK_MODE was set for this run."),
    ))
    return rows
