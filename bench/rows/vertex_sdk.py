"""Row 18: the Vertex AI SDK driving `aiptrain local serve`, against aiptrain's own mlv1 client.

18a: a CustomJob created with `google-cloud-aiplatform` (REST transport) and waited for with its
`run(sync=True)`, create to SUCCEEDED, whole process (the SDK's import included); the anchor is
the same noop trainer submitted by `aiptrain jobs submit training --backend mlv1 --stream-logs`
to the same server. Both name a package already in the server's local store.
"""

from __future__ import annotations

import importlib.util
import shutil
from functools import partial

from bench.context import BenchContext
from bench.environment import PYTHON, aiptrain_command, isolated_env, start_local_serve, time_command
from bench.harness import RowResult, alternate, paired_row, ratio_max

RUNS = 5
PROJECT = "bench-sdk-project"
PACKAGE_URI = "gs://bench-sdk/packages/noop.tar.gz"
SCRIPT = "bench/scripts/sdk_custom_job.py"
TITLE = "Vertex AI SDK CustomJob via `local serve`, create to SUCCEEDED, vs `jobs submit training --backend mlv1`"


def run(ctx: BenchContext) -> list[RowResult]:
    row = RowResult(row_id="18a", group="vertex-sdk", title=TITLE, unit="s", goal=ratio_max(1.3),
                    anchor_label="`aiptrain jobs submit training --backend mlv1 --stream-logs`, same server")
    if importlib.util.find_spec("google.cloud.aiplatform") is None:
        row.status = "not measured"
        row.notes = "google-cloud-aiplatform is not installed (the `test` extra)."
        return [row]
    from aiptrain._packaging import build_package

    home = ctx.cleanup.new_home("vertex-sdk")
    env = isolated_env(home)
    sdist = build_package(ctx.package_path("noop"), cache_dir=ctx.scratch / "vertex-sdk-cache").path
    staged = home / "storage" / PACKAGE_URI.removeprefix("gs://")
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sdist, staged)
    url = start_local_serve(ctx.cleanup, env, ctx.scratch / "vertex-sdk-serve.log", "--no-auth", "--no-grpc")
    counter = iter(range(10**6))

    def sdk(name: str) -> list[str]:
        return [str(PYTHON), SCRIPT, url, PROJECT, PACKAGE_URI, name]

    def mlv1(job_id: str) -> list[str]:
        return [*aiptrain_command(), "jobs", "submit", "training", job_id, "--backend", "mlv1", "--api-endpoint", url,
                "--project", PROJECT, "--packages", PACKAGE_URI, "--module-name", "trainer.task", "--region",
                "us-central1", "--runtime-version", "2.11", "--stream-logs"]

    def timed(command: object, prefix: str) -> float:
        assert callable(command)
        return time_command(command(f"{prefix}_{next(counter)}"), env=env, timeout=600)

    paired = alternate(partial(timed, sdk, "sdk"), partial(timed, mlv1, "mlv1"), ctx.runs(RUNS), warmup=1)
    row.commands = [ctx.show(sdk("sdk_N"))]
    row.anchor_commands = [ctx.show(mlv1("mlv1_N"), home=True)]
    row.notes = ("Whole processes, 1 warm-up pair not counted; the same `local serve --no-auth` runs both, the noop "
                 "trainer (bench/trainers/noop) staged once in its store. `run(sync=True)` reads the job's state "
                 "every 5 s (the SDK's fixed `_JOB_WAIT_TIME`), so its time is the SDK's import (~3 s) plus whole "
                 "5 s steps; `--stream-logs` polls adaptively from 0.5 s.")
    return [paired_row(row, paired)]
