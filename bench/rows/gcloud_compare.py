"""Row 10: aiptrain against Google's own gcloud, on the same machine and the same emulator.

- 10a/10b: `aiptrain local train` vs `gcloud ai-platform local train` of trainer_template on the
  digits data, one replica and chief + 1 worker + 2 parameter servers, whole command wall time
  (gcloud runs the trainer with the same interpreter, through `ml_engine/local_python`).
- 10c/10d: submit to SUCCEEDED with `--stream-logs`, the noop trainer, through one
  `aiptrain local serve` (and a fake-gcs-server for staging): aiptrain with `--backend mlv1`
  against gcloud with the configuration `local serve --gcloud-config` wrote, at 1 s polling
  (`ml_engine/polling_interval`) and at its default 60 s (one pair: it takes minutes).
- 10e: `jobs list` of 1,000 jobs stored in the emulator's engine, every page, default output.

Each pair alternates which side runs first; the ratio is aiptrain / gcloud (lower is better).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.context import BenchContext
from bench.environment import PYTHON, BenchError, aiptrain_command, isolated_env, run_checked, time_command
from bench.harness import Paired, RowResult, alternate, paired_row
from bench.rows.store_scale import PROJECT as LIST_PROJECT
from bench.rows.store_scale import fill_store
from bench.rows.training import make_data, template_ready

RUNS = 3
TRAIN_STEPS = 300
QUICK_TRAIN_STEPS = 100
LISTED_JOBS = 1_000
SUBMIT_PROJECT = "bench-project"
CONFIG_NAME = "aiptrain-bench"
_SERVING = re.compile(r"on (http://127\.0\.0\.1:\d+/)")


def _titles() -> list[tuple[str, str]]:
    return [
        ("11a", "`local train` of trainer_template, 1 replica: aiptrain vs gcloud, wall time"),
        ("11b", "`local train` of trainer_template, chief + 1 worker + 2 PS: aiptrain vs gcloud, wall time"),
        ("11c", "submit to SUCCEEDED with `--stream-logs` via `local serve`: aiptrain vs gcloud at 1 s polling"),
        ("11d", "submit to SUCCEEDED with `--stream-logs` via `local serve`: aiptrain vs gcloud at its default "
                "60 s polling"),
        ("11e", f"`jobs list` of {LISTED_JOBS:,} jobs via `local serve`: aiptrain vs gcloud, wall time"),
    ]


def _row(row_id: str, title: str, **kwargs: Any) -> RowResult:
    return RowResult(row_id=row_id, group="gcloud", title=title, unit="s",
                     anchor_label="the same work done by Google's gcloud", **kwargs)


class _Emulator:
    """`aiptrain local serve --gcloud-config` with a fake-gcs-server behind it."""

    def __init__(self, ctx: BenchContext, home: Path, cloudsdk: Path) -> None:
        from tests.fixtures.gcs import start_fake_gcs

        self._gcs_context = start_fake_gcs()
        self.gcs = self._gcs_context.__enter__()
        self.bucket = self.gcs.make_bucket("aiptrain-bench-staging")
        env = isolated_env(home, {"CLOUDSDK_CONFIG": str(cloudsdk), "STORAGE_EMULATOR_HOST": self.gcs.endpoint})
        log = ctx.scratch / "gcloud-serve.log"
        with open(log, "wb") as sink:
            self.process = subprocess.Popen(
                [*aiptrain_command(), "local", "serve", "--port", "0", "--gcloud-config", CONFIG_NAME,
                 "--project", SUBMIT_PROJECT], env=env, stdout=sink, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        ctx.cleanup.track(self.process)
        deadline = time.monotonic() + 60
        while True:
            text = log.read_text(errors="replace")
            match = _SERVING.search(text)
            if match and "Point gcloud at it" in text:
                self.url = match.group(1)
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise BenchError("aiptrain local serve did not start:\n" + text[-2000:])
            time.sleep(0.1)

    def close(self) -> None:
        self._gcs_context.__exit__(None, None, None)


def run(ctx: BenchContext) -> list[RowResult]:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return [_row(row_id, title, status="not measured", notes="gcloud is not on PATH.")
                for row_id, title in _titles()]
    titles = dict(_titles())
    rows: list[RowResult] = []
    home = ctx.cleanup.new_home("gcloud")
    cloudsdk = ctx.scratch / "cloudsdk"
    gcloud_env = isolated_env(home, {
        "CLOUDSDK_CONFIG": str(cloudsdk), "CLOUDSDK_ACTIVE_CONFIG_NAME": CONFIG_NAME,
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1", "CLOUDSDK_ML_ENGINE_LOCAL_PYTHON": str(PYTHON)})
    rows += _local_train_rows(ctx, gcloud, gcloud_env, titles)
    emulator = _Emulator(ctx, home, cloudsdk)
    try:
        rows += _submit_rows(ctx, gcloud, gcloud_env, emulator, titles)
        rows.append(_list_row(ctx, gcloud, gcloud_env, emulator, home, titles["11e"]))
    finally:
        emulator.close()
    return rows


def _local_train_rows(ctx: BenchContext, gcloud: str, gcloud_env: dict[str, str],
                      titles: dict[str, str]) -> list[RowResult]:
    if not template_ready(ctx):
        return [_row(row_id, titles[row_id], status="not measured", notes="trainer_template/ is not ready.")
                for row_id in ("11a", "11b")]
    env = isolated_env(ctx.cleanup.new_home("gcloud-train"))
    data = make_data(ctx, env)
    steps = QUICK_TRAIN_STEPS if ctx.quick else TRAIN_STEPS
    package = ctx.package_path("template")
    user_args = ["--train-files", f"{data}/train-*.csv", "--eval-files", f"{data}/eval-*.csv",
                 "--train-steps", str(steps), "--log-steps", "100"]
    rows = []
    for row_id, cluster in (("11a", []), ("11b", ["--distributed", "--worker-count", "1",
                                                   "--parameter-server-count", "2"])):
        def ours(job_dir: str, cluster: list[str] = cluster) -> list[str]:
            return [*aiptrain_command(), "local", "train", "--package-path", str(package), "--module-name",
                    "trainer.task", *cluster, "--job-dir", job_dir, "--", *user_args]

        def theirs(job_dir: str, cluster: list[str] = cluster) -> list[str]:
            return [gcloud, "ai-platform", "local", "train", "--package-path", str(package), "--module-name",
                    "trainer.task", *cluster, "--job-dir", job_dir, "--", *user_args]

        def timed(command: Callable[[str], list[str]], run_env: dict[str, str]) -> float:
            job_dir = tempfile.mkdtemp(prefix="gcloud-train-", dir=ctx.scratch)
            return time_command(command(job_dir), env=run_env, timeout=900)

        paired = alternate(partial(timed, ours, env), partial(timed, theirs, gcloud_env), ctx.runs(RUNS), warmup=0)
        rows.append(paired_row(_row(
            row_id, titles[row_id], commands=[ctx.show(ours("$SCRATCH/gcloud-train-…"), home=True)],
            anchor_commands=[ctx.show(theirs("$SCRATCH/gcloud-train-…"),
                                      env={"CLOUDSDK_ML_ENGINE_LOCAL_PYTHON": ".venv/bin/python"})],
            notes=f"{steps} training steps of the digits data; the whole command, TensorFlow start-up included. "
                  "Both run the trainer with the same Python. No warm-up pair.",
        ), paired))
    return rows


def _submit_rows(ctx: BenchContext, gcloud: str, gcloud_env: dict[str, str], emulator: _Emulator,
                 titles: dict[str, str]) -> list[RowResult]:
    package = ctx.package_path("noop")
    counter = iter(range(10**6))
    aiptrain_env = isolated_env(ctx.cleanup.new_home("gcloud-client"),
                                {"STORAGE_EMULATOR_HOST": emulator.gcs.endpoint})

    def ours(job_id: str) -> list[str]:
        return [*aiptrain_command(), "jobs", "submit", "training", job_id, "--backend", "mlv1", "--api-endpoint",
                emulator.url, "--project", SUBMIT_PROJECT, "--package-path", str(package), "--module-name",
                "trainer.task", "--region", "us-central1", "--staging-bucket", emulator.bucket, "--stream-logs"]

    def theirs(job_id: str) -> list[str]:
        return [gcloud, "ai-platform", "jobs", "submit", "training", job_id, "--package-path", str(package),
                "--module-name", "trainer.task", "--region", "us-central1", "--staging-bucket", emulator.bucket,
                "--stream-logs"]

    def timed(command: Callable[[str], list[str]], run_env: dict[str, str], prefix: str) -> float:
        return time_command(command(f"{prefix}_{next(counter)}"), env=run_env, timeout=900, cwd=package.parent)

    fast_env = {**gcloud_env, "CLOUDSDK_ML_ENGINE_POLLING_INTERVAL": "1"}
    rows = []
    for row_id, their_env, runs, note in (
            ("11c", fast_env, ctx.runs(RUNS), "gcloud with `ml_engine/polling_interval` 1 (the `--polling-interval` "
             "of `stream-logs`)."),
            ("11d", gcloud_env, 1, "gcloud at its default 60 s polling; one pair (a gcloud run takes minutes).")):
        paired: Paired = alternate(partial(timed, ours, aiptrain_env, "ours"), partial(timed, theirs, their_env,
                                                                                          "theirs"), runs, warmup=0)
        shown_env = {"CLOUDSDK_ML_ENGINE_POLLING_INTERVAL": "1"} if row_id == "11c" else {}
        rows.append(paired_row(_row(
            row_id, titles[row_id], commands=[ctx.show(ours("ours_N"))],
            anchor_commands=[ctx.show(theirs("theirs_N"), env={"CLOUDSDK_ACTIVE_CONFIG_NAME": CONFIG_NAME,
                                                                 **shown_env})],
            notes="The noop trainer (bench/trainers/noop), packaged from --package-path and staged in a "
                  "fake-gcs-server by each client; the same emulator runs both. " + note,
        ), paired))
    return rows


def _list_row(ctx: BenchContext, gcloud: str, gcloud_env: dict[str, str], emulator: _Emulator, home: Path,
              title: str) -> RowResult:
    fill_store(home, LISTED_JOBS)
    ours = [*aiptrain_command(), "jobs", "list", "--backend", "mlv1", "--api-endpoint", emulator.url,
            "--project", LIST_PROJECT]
    theirs = [gcloud, "ai-platform", "jobs", "list", "--project", LIST_PROJECT]
    aiptrain_env = isolated_env(ctx.cleanup.new_home("gcloud-list"))
    for argv, run_env in ((ours, aiptrain_env), (theirs, gcloud_env)):
        shown = run_checked(argv, env=run_env).stdout
        if shown.count("history_") != LISTED_JOBS:
            raise BenchError(f"`{' '.join(argv)}` listed {shown.count('history_')} jobs, not {LISTED_JOBS}")
    paired = alternate(partial(time_command, ours, env=aiptrain_env), partial(time_command, theirs, env=gcloud_env),
                       ctx.runs(RUNS))
    return paired_row(_row(
        "11e", title, commands=[ctx.show(ours)], anchor_commands=[ctx.show(theirs)],
        notes=f"{LISTED_JOBS:,} SUCCEEDED jobs written to the emulator's store directly (as in row 7); both sides "
              "page through all of them (aiptrain 100 per page, gcloud its own page size) and print their default "
              "table. One warm-up pair.",
    ), paired)
