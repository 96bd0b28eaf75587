"""Row 3: `jobs submit training --dry-run` end to end, cold and warm, against gcloud's bare build.

A dry-run validates, packages and renders the request; nothing is uploaded or created. Cold runs
get a fresh AIPTRAIN_HOME each time (empty build cache); warm runs share one whose cache holds
the template's sdist. The anchor is the packaging step alone of a gcloud submit (row 2's), which
gcloud ran before it could say anything about the job.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from bench.context import BenchContext
from bench.environment import aiptrain_command, isolated_env, run_checked, time_command
from bench.harness import RowResult, alternate, paired_row
from bench.rows.packaging import gcloud_anchor, gcloud_anchor_command, gcloud_anchor_label

RUNS = 5


def dry_run_argv(package_path: Path) -> list[str]:
    return [*aiptrain_command(), "jobs", "submit", "training", "bench_dry_run", "--dry-run",
            "--package-path", str(package_path), "--module-name", "trainer.task",
            "--region", "us-central1", "--format", "json"]


def _cold(ctx: BenchContext, argv: list[str]) -> float:
    return time_command(argv, env=isolated_env(ctx.cleanup.new_home("dry-run-cold")))


def run(ctx: BenchContext) -> list[RowResult]:
    argv = dry_run_argv(ctx.package_path("template"))
    anchor = partial(gcloud_anchor, ctx, isolated_env(ctx.cleanup.new_home("dry-run-anchor")))
    runs = ctx.runs(RUNS)
    cold = alternate(partial(_cold, ctx, argv), anchor, runs)

    warm_env = isolated_env(ctx.cleanup.new_home("dry-run-warm"))
    run_checked(argv, env=warm_env)  # fills the build cache
    warm = alternate(partial(time_command, argv, env=warm_env), anchor, runs)

    common = {
        "group": "dry-run",
        "unit": "s",
        "commands": [ctx.show(argv, home=True)],
        "anchor_commands": [gcloud_anchor_command(ctx)],
        "anchor_label": gcloud_anchor_label() + " (packaging only)",
    }
    return [
        paired_row(RowResult(
            row_id="3a", title="Dry-run submit of trainer_template, cold (fresh AIPTRAIN_HOME), wall time",
            notes="No goal was set for this row; shown for context next to row 2. The subject includes "
                  "CLI start, validation, the build and rendering the JSON plan.",
            **common,
        ), cold),
        paired_row(RowResult(
            row_id="3b", title="Dry-run submit of trainer_template, warm (build cache filled), wall time",
            notes="No goal was set for this row. The home's cache was filled by one dry-run before timing.",
            **common,
        ), warm),
    ]
