"""Row 17: a machine that runs jobs for months: a large store, long logs, a long queue.

- 17a/17b: `jobs list` on a store holding about 1 GB of log lines (one job of 2 million lines of
  500 characters), against a store of one job; 17b first evicts the large store's file from the
  page cache (posix_fadvise DONTNEED on jobs.db), as after a reboot or a long idle spell.
- 17c: `jobs stream-logs --tail 3` of that 2-million-line job, against the same on a 10-line job.
- 17d: the resident memory of aiptrain's processes with 100 jobs queued behind one running job
  (AIPTRAIN_LOCAL_MAX_RUNNING=1): the live supervisors' VmRSS, summed.

- 17e: Google's gcloud, `gcloud logging read --limit 3` newest first of that 2-million-line job
  through `aiptrain local serve --gcloud-config` (the Cloud Logging API's `entries:list`), against
  the same on the 10-line job (each home served by its own `local serve`).

17c and 17e say in their notes what a bare start-up of the command costs in the same run
(`aiptrain --version`; `gcloud config get-value project`), the floor under either figure.

Stores are filled through the store's own API (`insert_job`, `transition`, `append_logs`), not by
running trainers for minutes. `--row` picks rows (the stores are filled only when a row needs them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import timedelta
from functools import partial
from pathlib import Path

from bench.context import BenchContext
from bench.environment import (
    PYTHON,
    BenchError,
    aiptrain_command,
    isolated_env,
    run_checked,
    start_local_serve,
    time_command,
)
from bench.harness import RowResult, Stats, alternate, paired_row, ratio_max, value_max

RUNS = 7
PROJECT = "local-project"
LINES = 2_000_000
QUICK_LINES = 200_000
WIDTH = 500
QUEUED = 100
BATCH = 20_000


def fill_job(home: Path, job_id: str, lines: int, width: int) -> None:
    """A SUCCEEDED job whose log holds `lines` lines of `width` characters, 1 ms apart."""
    from aiptrain._backends.local.store import JobStore, PendingLine
    from aiptrain._job.spec import Job, JobState
    from aiptrain._replicas.clock import utc_now

    store = JobStore(home)
    try:
        record = store.insert_job(PROJECT, Job.model_validate({"jobId": job_id}), run_token=f"bench-{job_id}")
        store.transition(record.key, JobState.SUCCEEDED)
        first = utc_now() - timedelta(milliseconds=lines + 1000)
        filler = "x" * width
        for offset in range(0, lines, BATCH):
            store.append_logs(record.key, [
                PendingLine(first + timedelta(milliseconds=index), "INFO", "master-replica-0",
                            f"line {index} {filler}"[:width]) for index in range(offset, min(lines, offset + BATCH))])
    finally:
        store.close()


def _evict(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def _evicted_then(path: Path, argv: list[str], env: dict[str, str]) -> float:
    _evict(path)
    return time_command(argv, env=env)


def _store_mb(home: Path) -> str:
    return f"{sum(p.stat().st_size for p in home.glob('jobs.db*')) / 1e6:,.0f}"


def run(ctx: BenchContext) -> list[RowResult]:
    rows = []
    if any(ctx.wants(row_id) for row_id in ("17a", "17b", "17c", "17e")):
        rows += _large_log_rows(ctx)
    if ctx.wants("17d"):
        rows.append(_queued_memory(ctx))
    return rows


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def _large_log_rows(ctx: BenchContext) -> list[RowResult]:
    lines = QUICK_LINES if ctx.quick else LINES
    large_home, small_home = ctx.cleanup.new_home("long-large"), ctx.cleanup.new_home("long-small")
    fill_job(large_home, "long_log", lines, WIDTH)
    fill_job(small_home, "long_log", 10, WIDTH)
    large_env, small_env = isolated_env(large_home), isolated_env(small_home)
    listing = [*aiptrain_command(), "jobs", "list"]
    tail = [*aiptrain_command(), "jobs", "stream-logs", "long_log", "--tail", "3"]
    shown = run_checked(tail, env=large_env).stdout.splitlines()
    if not shown or f"line {lines - 1} " not in shown[-1]:
        raise BenchError(f"--tail 3 did not end with line {lines - 1}: {shown[-1:]}")
    size = _store_mb(large_home)
    rows = []
    for row_id, what, subject in (
            ("17a", "`jobs list`", partial(time_command, listing, env=large_env)),
            ("17b", "`jobs list`, the store's file out of the page cache",
             partial(_evicted_then, large_home / "jobs.db", listing, large_env))):
        if not ctx.wants(row_id):
            continue
        paired = alternate(subject, partial(time_command, listing, env=small_env), ctx.runs(RUNS))
        rows.append(paired_row(RowResult(
            row_id=row_id, group="long-running", unit="s",
            title=f"{what} with {size} MB of logs in the store (anchor: a store of one short job), wall time",
            goal=ratio_max(1.3), commands=[ctx.show(listing, home=True) + f"   # {lines:,} log lines of {WIDTH} chars"],
            anchor_commands=[ctx.show(listing, home=True) + "   # one job of 10 lines"],
            anchor_label="the same command on a store of one short job",
            notes=f"jobs.db of the large home: {size} MB. One warm-up pair.",
        ), paired))
    if ctx.wants("17c"):
        start_up = [*aiptrain_command(), "--version"]
        paired = alternate(partial(time_command, tail, env=large_env), partial(time_command, tail, env=small_env),
                           ctx.runs(RUNS))
        bare = _median([time_command(start_up, env=small_env) for _ in range(ctx.runs(RUNS))])
        rows.append(paired_row(RowResult(
            row_id="17c", group="long-running", unit="s",
            title=f"`jobs stream-logs --tail 3` of a {lines:,}-line finished job, wall time",
            goal=value_max(0.5, "s"), commands=[ctx.show(tail, home=True)],
            anchor_commands=[ctx.show(tail, home=True) + "   # a 10-line job"],
            anchor_label="the same command on a 10-line job",
            notes="The tail is found by one seek from the newest end of the log's index; the whole log is not read. "
                  f"The CLI's bare start-up in the same run (`aiptrain --version`, median of {ctx.runs(RUNS)}): "
                  f"{bare:.2f} s.",
        ), paired))
    if ctx.wants("17e"):
        rows.append(_gcloud_newest_row(ctx, lines, large_home, small_home))
    return rows


GCLOUD_CONFIG = "aiptrain-bench-logs"


def _gcloud_env(ctx: BenchContext, home: Path) -> dict[str, str]:
    """`aiptrain local serve --gcloud-config` on `home`, and gcloud's environment pointed at it."""
    cloudsdk = ctx.scratch / f"cloudsdk-{home.name}"
    serve_env = isolated_env(home, {"CLOUDSDK_CONFIG": str(cloudsdk)})
    log = ctx.scratch / f"serve-{home.name}.log"
    start_local_serve(ctx.cleanup, serve_env, log, "--gcloud-config", GCLOUD_CONFIG, "--project", PROJECT)
    deadline = time.monotonic() + 30
    while "Point gcloud at it" not in log.read_text(errors="replace"):  # the configuration is written
        if time.monotonic() > deadline:
            raise BenchError("local serve wrote no gcloud configuration:\n" + log.read_text(errors="replace")[-2000:])
        time.sleep(0.1)
    return isolated_env(home, {"CLOUDSDK_CONFIG": str(cloudsdk), "CLOUDSDK_ACTIVE_CONFIG_NAME": GCLOUD_CONFIG,
                               "CLOUDSDK_CORE_DISABLE_PROMPTS": "1", "NO_PROXY": "127.0.0.1,localhost",
                               "no_proxy": "127.0.0.1,localhost"})


def _gcloud_newest_row(ctx: BenchContext, lines: int, large_home: Path, small_home: Path) -> RowResult:
    title = f"`gcloud logging read --limit 3` newest first of a {lines:,}-line job via `local serve`, wall time"
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return RowResult(row_id="17e", group="long-running", unit="s", title=title, status="not measured",
                         notes="gcloud is not on PATH.")
    large_env, small_env = _gcloud_env(ctx, large_home), _gcloud_env(ctx, small_home)
    read = [gcloud, "logging", "read", 'resource.labels.job_id="long_log"', "--limit", "3", "--freshness", "1d",
            "--format", "value(textPayload)"]
    shown = run_checked(read, env=large_env).stdout.splitlines()
    if not shown or not shown[0].startswith(f"line {lines - 1} "):
        raise BenchError(f"gcloud logging read did not start with line {lines - 1}: {[s[:20] for s in shown]}")
    paired = alternate(partial(time_command, read, env=large_env), partial(time_command, read, env=small_env),
                       ctx.runs(RUNS))
    start_up = [gcloud, "config", "get-value", "project"]
    bare = _median([time_command(start_up, env=small_env) for _ in range(ctx.runs(RUNS))])
    return paired_row(RowResult(
        row_id="17e", group="long-running", unit="s", title=title, goal=value_max(1.0, "s"),
        commands=[ctx.show(read, home=True) + "   # gcloud configured by local serve --gcloud-config"],
        anchor_commands=[ctx.show(read, home=True) + "   # a 10-line job"],
        anchor_label="the same gcloud command on a 10-line job",
        notes="Newest first is the Cloud Logging API's default order; the server seeks from the newest end of "
              "the job's log index. gcloud's own bare start-up in the same run (`gcloud config get-value "
              f"project`, median of {ctx.runs(RUNS)}): {bare:.2f} s, most of either figure.",
    ), paired)


_SUBMIT_QUEUE = """
import sys
from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import as_new_job
engine = LocalJobEngine()
template = engine.get("local-project", "holder")
for index in range(int(sys.argv[1])):
    job = as_new_job(template)
    job.job_id = "queued_%03d" % index
    job.training_input.args = []
    engine.submit("local-project", job)
engine.store.close()
"""


def _resident_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return 0.0


def _supervisors_mb(home: Path) -> float:
    from aiptrain._backends.local.store import JobStore
    from aiptrain._replicas.processes import is_running

    store = JobStore(home)
    try:
        rows = store.connection().execute("SELECT supervisor_pid, supervisor_start_ticks FROM jobs").fetchall()
    finally:
        store.close()
    return sum(_resident_mb(pid) for pid, ticks in rows if pid and is_running(pid, ticks))


def _queued_memory(ctx: BenchContext) -> RowResult:
    home = ctx.cleanup.new_home("queue")
    env = isolated_env(home, {"AIPTRAIN_LOCAL_MAX_RUNNING": "1"})
    holder = [*aiptrain_command(), "jobs", "submit", "training", "holder", "--package-path",
              str(ctx.package_path("noop")), "--module-name", "trainer.task", "--region", "us-central1", "--async",
              "--", "--sleep", "600"]
    run_checked(holder, env=env)
    deadline = time.monotonic() + 120
    while json.loads(run_checked([*aiptrain_command(), "jobs", "describe", "holder", "--format", "json"],
                                 env=env).stdout)["state"] != "RUNNING":
        if time.monotonic() > deadline:
            raise BenchError("the holder job did not start")
        time.sleep(0.5)
    subprocess.run([str(PYTHON), "-c", _SUBMIT_QUEUE, str(QUEUED)], env=env, check=True, timeout=600)
    samples = []
    for _ in range(ctx.runs(3)):
        time.sleep(1.0)
        samples.append(_supervisors_mb(home))
    return RowResult(
        row_id="17d", group="long-running", unit="MB",
        title=f"Resident memory of aiptrain's processes with {QUEUED} jobs queued behind one running job",
        subject=Stats.of(samples), goal=value_max(300, "MB"),
        commands=[ctx.show(holder, home=True, env={"AIPTRAIN_LOCAL_MAX_RUNNING": "1"}),
                  f"then {QUEUED} more jobs submitted through the engine's API"],
        notes="The sum of VmRSS over the live supervisors of the home (queued jobs have none: their supervisors "
              "start when a slot is theirs). 1 MB = 10^6 bytes.",
    )
