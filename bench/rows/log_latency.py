"""Row 5: how long a trainer's line takes to reach `aiptrain jobs stream-logs`, p50 and p95.

The trainer (bench/trainers/log_lines) prints 200 lines, each carrying the wall-clock time it
was printed, 20-50 ms apart. `jobs stream-logs JOB` runs as a subprocess; each line is stamped
when it arrives on the follower's stdout, and latency = arrival - printed time (one clock,
one machine). Measured on the local backend and over REST against `aiptrain local serve`.

The anchor is computed, not run: gcloud polled every 60 s and never read the newest 5 s. A line
printed at time t is first returned by the first poll at or after t + 5 s; with polls 60 s
apart and lines arriving uniformly between them, latency = 5 + U with U ~ Uniform(0, 60):
mean and median 35 s, p95 = 5 + 0.95 * 60 = 62 s (a lower bound: request time is ignored).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.context import BenchContext
from bench.environment import BenchError, aiptrain_command, isolated_env, run_checked, stop_jobs_in, stop_process
from bench.harness import RowResult, Stats, percentile, ratio_of_medians, value_max
from tests.fixtures.gcs import free_port

RUNS = 3
LINES = 200
QUICK_LINES = 50
FOLLOW_TIMEOUT = 240.0
SERVE_START_TIMEOUT = 30.0
GCLOUD_POLL_SECONDS = 60.0
GCLOUD_UNREAD_WINDOW_SECONDS = 5.0
_LINE = re.compile(r"BENCHLINE (\d+) (\d+\.\d+)")


def gcloud_latency(fraction: float) -> float:
    """The `fraction` quantile of gcloud's latency: 5 s unread window + Uniform(0, 60 s) to the next poll."""
    return GCLOUD_UNREAD_WINDOW_SECONDS + fraction * GCLOUD_POLL_SECONDS


@dataclass(frozen=True)
class FollowedRun:
    latencies: list[float]
    missed_before_attach: int  # lines printed before the follower printed anything (not counted)


def follow(argv: list[str], env: dict[str, str], ctx: BenchContext, expected: int) -> FollowedRun:
    """Run the follower until it exits; latency of every BENCHLINE it prints."""
    # Stderr goes to a file, not a pipe: nobody reads it while lines stream.
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=errors,
                                   stdin=subprocess.DEVNULL, text=True, bufsize=1)
        ctx.cleanup.track(process)
        watchdog = threading.Timer(FOLLOW_TIMEOUT, process.kill)
        watchdog.start()
        try:
            latencies, missed = _read_lines(process)
            returncode = process.wait()
        finally:
            watchdog.cancel()
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    if returncode != 0:
        raise BenchError(f"`{' '.join(argv)}` exited {returncode}: {stderr[-2000:]}")
    if len(latencies) + missed != expected:
        raise BenchError(f"the follower showed {len(latencies) + missed} of {expected} lines")
    return FollowedRun(latencies, missed)


def _read_lines(process: subprocess.Popen[str]) -> tuple[list[float], int]:
    """Latencies of the BENCHLINEs on stdout, and how many were printed before the first output line."""
    attached_at: float | None = None
    latencies: list[float] = []
    missed = 0
    assert process.stdout is not None
    for line in process.stdout:
        arrived = time.time()
        attached_at = attached_at if attached_at is not None else arrived
        match = _LINE.search(line)
        if match is None:
            continue
        printed = float(match.group(2))
        if printed < attached_at:
            missed += 1
        else:
            latencies.append(arrived - printed)
    return latencies, missed


def submit_argv(job_id: str, package: Path, lines: int, backend_args: list[str]) -> list[str]:
    return [*aiptrain_command(), "jobs", "submit", "training", job_id, *backend_args,
            "--package-path", str(package), "--module-name", "trainer.task", "--region", "us-central1",
            "--", "--lines", str(lines)]


def measure(ctx: BenchContext, name: str, submit_env: dict[str, str], follow_env: dict[str, str],
            backend_args: list[str], submit_extra: list[str]) -> tuple[list[FollowedRun], list[str]]:
    lines = QUICK_LINES if ctx.quick else LINES
    package = ctx.package_path("log_lines")
    runs = []
    commands: list[str] = []
    for index in range(ctx.runs(RUNS)):
        job_id = f"latency_{name}_{index}"
        submit = submit_argv(job_id, package, lines, [*backend_args, *submit_extra])
        run_checked(submit, env=submit_env, timeout=180)
        stream = [*aiptrain_command(), "jobs", "stream-logs", job_id, *backend_args]
        runs.append(follow(stream, follow_env, ctx, lines))
        commands = [ctx.show(submit, home=True), ctx.show(stream, home=True)]
    return runs, commands


def local_rows(ctx: BenchContext) -> list[RowResult]:
    env = isolated_env(ctx.cleanup.new_home("latency-local"))
    runs, commands = measure(ctx, "local", env, env, [], [])
    return latency_rows(ctx, "5a", "5b", "local backend", runs, commands, goal_p95=0.5)


def rest_rows(ctx: BenchContext) -> list[RowResult]:
    home = ctx.cleanup.new_home("latency-rest-server")
    port = free_port()
    serve = [*aiptrain_command(), "local", "serve", "--port", str(port)]
    log = (ctx.scratch / "serve.log").open("wb")
    server = subprocess.Popen(serve, env=isolated_env(home), stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
    ctx.cleanup.track(server)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_server(url, server)
        backend = ["--backend", "mlv1", "--api-endpoint", url, "--project", "bench-project"]
        # The submitter shares the server's home so `--storage local` stages where the engine reads;
        # the follower has a home of its own.
        submit_env = isolated_env(home)
        follow_env = isolated_env(ctx.cleanup.new_home("latency-rest-client"))
        runs, commands = measure(ctx, "rest", submit_env, follow_env, backend,
                                 ["--storage", "local", "--staging-bucket", "gs://bench-staging"])
    finally:
        stop_jobs_in(home)
        stop_process(server)
        log.close()
    commands.insert(0, ctx.show(serve, home=True) + "   # server, its own home")
    return latency_rows(ctx, "5c", "5d", "REST (`--backend mlv1` against `aiptrain local serve`)", runs, commands,
                        goal_p95=2.0)


def wait_for_server(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SERVE_START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise BenchError(f"`aiptrain local serve` exited {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}v1/projects/bench-project/jobs", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise BenchError("`aiptrain local serve` did not answer in time")


def latency_rows(ctx: BenchContext, p50_id: str, p95_id: str, where: str, runs: list[FollowedRun],
                 commands: list[str], *, goal_p95: float) -> list[RowResult]:
    lines = len(runs[0].latencies) + runs[0].missed_before_attach
    missed = sum(r.missed_before_attach for r in runs)
    rows = []
    for row_id, fraction, goal in ((p50_id, 0.5, None), (p95_id, 0.95, value_max(goal_p95, "s"))):
        subject = Stats.of([percentile(r.latencies, fraction) for r in runs])
        anchor = Stats.of([gcloud_latency(fraction)])
        label = f"p{round(fraction * 100)}"
        rows.append(RowResult(
            row_id=row_id, group="log-latency", unit="s",
            title=f"Log latency {label}, {where}, {lines} lines",
            subject=subject, anchor=anchor, ratio=ratio_of_medians(subject, anchor), ratio_method="medians",
            goal=goal, commands=commands,
            anchor_commands=[f"analytic: {GCLOUD_UNREAD_WINDOW_SECONDS:g} s + {fraction:g} x "
                             f"{GCLOUD_POLL_SECONDS:g} s"],
            anchor_label="gcloud's 60 s polling with an unread 5 s window (computed)",
            notes=f"Per run: the {label} of the {lines} lines' latencies; median/min/max over runs. "
                  f"Lines printed before the follower attached: {missed} (not counted)."
                  + ("" if goal else " No goal for p50."),
        ))
    return rows


def run(ctx: BenchContext) -> list[RowResult]:
    return [*local_rows(ctx), *rest_rows(ctx)]
