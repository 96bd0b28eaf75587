"""Row 19: Google's clients through `local serve`'s proxy vs the same clients given its endpoint.

19a: a Vertex AI SDK CustomJob (REST), create to SUCCEEDED, whole process, told only a project and
a location under `aiptrain local env`'s environment; the anchor is the same script given
`api_endpoint`. 19b: the same for googleapiclient's ml v1 `jobs.create` and `get` until SUCCEEDED.
19c: what the proxy adds to one request on a kept connection (`requests`, `jobs.list`): the mean of
a batch through the proxy minus the mean of a batch given the endpoint, batches alternating.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from functools import partial
from typing import Any

from bench.context import BenchContext
from bench.environment import PYTHON, REPO, isolated_env, start_local_serve, time_command
from bench.harness import RowResult, Stats, alternate, paired_row, ratio_max, value_max

RUNS = 5
PROJECT = "bench-proxy"
PACKAGE_URI = "gs://bench-proxy/packages/noop.tar.gz"
SCRIPT = "bench/scripts/proxy_clients.py"
COST_SCRIPT = "bench/scripts/proxy_request_cost.py"


def run(ctx: BenchContext) -> list[RowResult]:
    rows = [
        RowResult(row_id="19a", group="proxy", unit="s", goal=ratio_max(1.1),
                  title="Vertex AI SDK CustomJob told only project and location (proxy), create to SUCCEEDED",
                  anchor_label="the same script given `api_endpoint`, same server"),
        RowResult(row_id="19b", group="proxy", unit="s", goal=ratio_max(1.1),
                  title="googleapiclient `discovery.build(\"ml\", \"v1\")` job (proxy), create to SUCCEEDED",
                  anchor_label="the same script given `client_options={\"api_endpoint\": ...}`, same server"),
        RowResult(row_id="19c", group="proxy", unit="ms", goal=value_max(5, "ms"),
                  title="What the proxy adds to one request on a kept connection (`requests`, `jobs.list`)"),
    ]
    if importlib.util.find_spec("google.cloud.aiplatform") is None:
        for row in rows:
            row.status = "not measured"
            row.notes = "google-cloud-aiplatform is not installed (the `test` extra)."
        return rows
    from aiptrain._packaging import build_package

    home = ctx.cleanup.new_home("proxy")
    base = isolated_env(home)
    sdist = build_package(ctx.package_path("noop"), cache_dir=ctx.scratch / "proxy-cache").path
    staged = home / "storage" / PACKAGE_URI.removeprefix("gs://")
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sdist, staged)
    url = start_local_serve(ctx.cleanup, base, ctx.scratch / "proxy-serve.log", "--no-grpc")
    port = url.rstrip("/").rsplit(":", 1)[1]
    printed = subprocess.run([str(PYTHON), "-m", "aiptrain", "local", "env", "--port", port, "--format", "json"],
                             env=base, cwd=REPO, capture_output=True, text=True, check=True, timeout=60)
    through_proxy: dict[str, str] = {**base, **json.loads(printed.stdout)}
    direct = {**base, "GOOGLE_APPLICATION_CREDENTIALS": through_proxy["GOOGLE_APPLICATION_CREDENTIALS"]}
    counter = iter(range(10**6))

    def command(client: str, endpoint: str, name: str) -> list[str]:
        return [str(PYTHON), SCRIPT, client, endpoint, PROJECT, PACKAGE_URI, name]

    def timed(client: str, endpoint: str, env: dict[str, str]) -> float:
        return time_command(command(client, endpoint, f"{client}_{next(counter)}"), env=env, timeout=600)

    for row, client in ((rows[0], "vertex"), (rows[1], "ml")):
        if not ctx.wants(row.row_id):
            row.status = "not measured"
            continue
        paired = alternate(partial(timed, client, "proxy", through_proxy), partial(timed, client, url, direct),
                           ctx.runs(RUNS), warmup=1)
        row.commands = [ctx.show(command(client, "proxy", "NAME"), env={"(local env)": "..."})]
        row.anchor_commands = [ctx.show(command(client, url, "NAME"))]
        row.notes = ("Whole processes, 1 warm-up pair not counted; one `local serve` (token on, no gRPC) answers "
                     "both, the noop trainer staged once in its store; credentials from its credentials file either "
                     "way.")
        rows[rows.index(row)] = paired_row(row, paired)
    cost = rows[2]
    if ctx.wants("19c"):
        done = subprocess.run([str(PYTHON), COST_SCRIPT, url, "20" if ctx.quick else "200"], env=through_proxy,
                              cwd=REPO, capture_output=True, text=True, check=True, timeout=600)
        samples: dict[str, Any] = json.loads(done.stdout)
        cost.subject = Stats.of([p - d for p, d in zip(samples["proxy"], samples["direct"], strict=True)])
        cost.anchor = Stats.of(samples["direct"])
        cost.anchor_label = "the request given the endpoint (its own time, not subtracted)"
        cost.commands = [ctx.show([str(PYTHON), COST_SCRIPT, url, "200"], env={"(local env)": "..."})]
        cost.notes = ("10 alternating batches of 200 `GET .../jobs?pageSize=1` on one kept connection each way "
                      "(TLS to the proxy's certificate for ml.googleapis.com, then plain HTTP on loopback); each "
                      "sample is a batch's mean through the proxy minus the next batch's mean given the endpoint.")
    else:
        cost.status = "not measured"
    return rows
