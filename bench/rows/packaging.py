"""Row 2: building trainer_template's sdist, cold and from the cache, against gcloud's build.

Both sides are a fresh Python process that copies the template's root and runs setuptools in
a child process (see bench/scripts/). The anchor is rebuilt every time, as gcloud did on every
submit; aiptrain's second build of unchanged sources is a cache hit.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from bench.context import BenchContext
from bench.environment import (
    PYTHON,
    SCRIPTS,
    BenchError,
    interpreter_floor,
    isolated_env,
    run_checked,
    time_command,
)
from bench.harness import RowResult, alternate, paired_row, ratio_max

RUNS = 11
GCLOUD_SCRIPT = SCRIPTS / "gcloud_sdist.py"
AIPTRAIN_SCRIPT = SCRIPTS / "aiptrain_build.py"


def gcloud_argv(ctx: BenchContext) -> list[str]:
    output = Path(tempfile.mkdtemp(prefix="gcloud-dist-", dir=ctx.scratch))
    return [str(PYTHON), str(GCLOUD_SCRIPT), str(ctx.project("template")), str(output)]


def gcloud_anchor(ctx: BenchContext, env: dict[str, str]) -> float:
    """One gcloud-style build into a fresh output directory."""
    return time_command(gcloud_argv(ctx), env=env)


def gcloud_anchor_command(ctx: BenchContext) -> str:
    return ctx.show([PYTHON, GCLOUD_SCRIPT, ctx.project("template"), "$SCRATCH/gcloud-dist-…"])


def gcloud_anchor_label() -> str:
    return ("gcloud's build: copy the root, `python setup.py egg_info --egg-base T build --build-base T "
            "--build-temp T sdist --dist-dir OUT`")


def _aiptrain_build(ctx: BenchContext, env: dict[str, str], cache: Path | None) -> float:
    cache = cache or Path(tempfile.mkdtemp(prefix="cold-cache-", dir=ctx.scratch))
    argv = [str(PYTHON), str(AIPTRAIN_SCRIPT), str(ctx.package_path("template")), str(cache)]
    return time_command(argv, env=env)


def run(ctx: BenchContext) -> list[RowResult]:
    home = ctx.cleanup.new_home("packaging")
    env = isolated_env(home)
    anchor = partial(gcloud_anchor, ctx, env)
    runs = ctx.runs(RUNS)
    subject_command = [PYTHON, AIPTRAIN_SCRIPT, ctx.package_path("template")]

    cold = alternate(partial(_aiptrain_build, ctx, env, None), anchor, runs)

    warm_cache = Path(tempfile.mkdtemp(prefix="warm-cache-", dir=ctx.scratch))
    argv = [str(PYTHON), str(AIPTRAIN_SCRIPT), str(ctx.package_path("template")), str(warm_cache)]
    run_checked(argv, env=env)
    if not run_checked(argv, env=env).stdout.startswith("cache-hit"):
        raise BenchError("the second build of unchanged sources was not a cache hit")
    warm = alternate(partial(_aiptrain_build, ctx, env, warm_cache), anchor, runs)
    floor = interpreter_floor(env, ctx.runs(5))

    common: dict[str, Any] = {
        "group": "packaging",
        "unit": "s",
        "anchor_commands": [gcloud_anchor_command(ctx)],
        "anchor_label": gcloud_anchor_label(),
    }
    return [
        paired_row(RowResult(
            row_id="2a", title="Packaging trainer_template, cold (empty build cache), wall time",
            goal=ratio_max(1.2),
            commands=[ctx.show([*subject_command, "$SCRATCH/cold-cache-…"]) + "   # an empty directory per run"],
            notes="Fresh process per build on each side; a new empty cache directory per aiptrain run. "
                  "aiptrain also hashes the tree and rewrites the archive reproducibly.",
            **common,
        ), cold),
        paired_row(RowResult(
            row_id="2b", title="Packaging trainer_template, unchanged sources (cache hit), wall time",
            goal=ratio_max(0.2),
            commands=[ctx.show([*subject_command, "$SCRATCH/warm-cache-…"]) + "   # filled by an earlier build"],
            notes="The cache was filled by one build before timing, and a second build was checked to be "
                  "a cache hit. The anchor rebuilds every time, as gcloud did on every submit. Both sides "
                  f"start a fresh interpreter: a bare `python -c pass` took {floor:.3f} s (median, measured "
                  "after the pairs).",
            **common,
        ), warm),
    ]
