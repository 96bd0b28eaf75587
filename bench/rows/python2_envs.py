"""Row 20: runtime 1.15's environment on Python 2.7 (virtualenv and pip 20.3.4, from the index of the
runtime's day) against the same runtime's on Python 3.7 (uv).

- 20a: `aiptrain local envs build 1.15 --python-version 2.7` into an empty envs directory, with no
  virtualenv tool and no kept index of the day yet (cold: every file downloaded; reported, no goal);
- 20b: the same, with the tool and the index of the day (pages and files) the cold build kept,
  paired with the Python 3.7 build from a warm uv cache (`alternate`); goal <= 2x.
pip's own wheel cache (sdists it built, ~/.cache/pip/wheels) is the machine's, warm or not.
"""

from __future__ import annotations

import itertools
import time

from bench.context import BenchContext
from bench.environment import aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, Stats, alternate, ratio_max

RUNTIME = "1.15"
_builds = itertools.count()


def _build_seconds(ctx: BenchContext, python: str, caches: dict[str, str]) -> float:
    """One build of runtime 1.15 on `python` into a new envs directory, with the given caches. The
    envs directories of one Python share their parent, so its `tools` (virtualenv) too, as in one home."""
    number = next(_builds)
    envs = ctx.scratch / f"py{python}" / f"envs-{number}"
    env = isolated_env(ctx.cleanup.new_home(f"py{python}-{number}"), caches, runtime_envs=envs)
    started = time.perf_counter()
    run_checked([*aiptrain_command(), "local", "envs", "build", RUNTIME, "--python-version", python], env=env,
                timeout=3600)
    return time.perf_counter() - started


def run(ctx: BenchContext) -> list[RowResult]:
    uv_cache = str(ctx.scratch / "uv-cache-py37")
    cold = _build_seconds(ctx, "2.7", {})
    build = [*aiptrain_command(), "local", "envs", "build", RUNTIME, "--python-version"]
    command = ctx.show([*build, "2.7"], home=True, env={"AIPTRAIN_ENVS_DIR": "$SCRATCH/py2.7/envs-N"})
    rows = [RowResult(
        row_id="20a", group="python2-envs", unit="s", subject=Stats.of([cold]), commands=[command],
        title="Runtime 1.15 environment build on Python 2.7 (virtualenv, pip 20.3.4, TensorFlow 1.15.0), nothing "
              "kept yet",
        notes="virtualenv installed with uv first; every file downloaded through the index of the runtime's day, "
              "which keeps it. Depends on the network. Reported, no goal.",
    )]
    paired = alternate(lambda: _build_seconds(ctx, "2.7", {}),
                       lambda: _build_seconds(ctx, "3.7", {"UV_CACHE_DIR": uv_cache}), ctx.runs(3))
    rows.append(RowResult(
        row_id="20b", group="python2-envs", unit="s", subject=paired.subject, anchor=paired.anchor,
        ratio=paired.ratio, ratio_method="pairs", goal=ratio_max(2),
        title="Runtime 1.15 environment build on Python 2.7 with the index of the day kept, against the same "
              "runtime on Python 3.7 with uv's cache warm",
        commands=[command],
        anchor_commands=[ctx.show([*build, "3.7"], home=True, env={"AIPTRAIN_ENVS_DIR": "$SCRATCH/py3.7/envs-N",
                                                                   "UV_CACHE_DIR": "$SCRATCH/uv-cache-py37"})],
        anchor_label="Python 3.7, uv",
        notes="A new envs directory each run; nothing downloaded on either side. pip unpacks every wheel and "
              "writes each file (1.9 GB for this set) where uv hard-links them from its cache: the gap is that copy.",
    ))
    return rows
