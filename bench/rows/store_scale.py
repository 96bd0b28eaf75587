"""Row 7: `jobs list --limit 50` and `jobs describe` with 10,000 stored jobs, against 10.

Two homes are filled through the store's own API (`JobStore.insert_job`, `transition`,
`append_logs`) with finished jobs, each with its state history and 20 log lines, rather than
by running 10,000 jobs. The same commands then run alternately against each home; the one
with 10 jobs is the anchor, so the ratio is what a long history costs.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from bench.context import BenchContext
from bench.environment import BenchError, aiptrain_command, isolated_env, run_checked, time_command
from bench.harness import RowResult, alternate, paired_row, ratio_max

RUNS = 10
LARGE = 10_000
QUICK_LARGE = 1_000
SMALL = 10
LOG_LINES_PER_JOB = 20
PROJECT = "local-project"


def job_id(index: int) -> str:
    return f"history_{index:05d}"


def fill_store(home: Path, count: int) -> None:
    """`count` SUCCEEDED jobs, oldest first, each with its transitions and log lines."""
    from aiptrain._backends.local.store import JobStore, PendingLine
    from aiptrain._job.spec import Job, JobState
    from aiptrain._replicas.clock import utc_now

    store = JobStore(home)
    try:
        for index in range(count):
            job = Job.model_validate({
                "jobId": job_id(index),
                "labels": {"team": "bench"},
                "trainingInput": {
                    "scaleTier": "BASIC", "region": "us-central1", "pythonModule": "trainer.task",
                    "packageUris": [f"gs://bench-staging/aiptrain/packages/{index:064x}/trainer-0.1.0.tar.gz"],
                    "args": ["--train-steps", "1000"], "jobDir": f"gs://bench-staging/jobs/{job_id(index)}",
                },
            })
            record = store.insert_job(PROJECT, job, run_token=f"bench-{index}")
            for state in (JobState.PREPARING, JobState.RUNNING):
                store.transition(record.key, state)
            store.append_logs(record.key, [PendingLine(utc_now(), "INFO", "master-replica-0", f"step {n}")
                                           for n in range(LOG_LINES_PER_JOB)])
            store.transition(record.key, JobState.SUCCEEDED)
    finally:
        store.close()


def run(ctx: BenchContext) -> list[RowResult]:
    large_count = QUICK_LARGE if ctx.quick else LARGE
    large_home = ctx.cleanup.new_home("store-large")
    small_home = ctx.cleanup.new_home("store-small")
    fill_store(large_home, large_count)
    fill_store(small_home, SMALL)
    large_env, small_env = isolated_env(large_home), isolated_env(small_home)

    commands = [
        ("7a", "`jobs list --limit 50`", [*aiptrain_command(), "jobs", "list", "--limit", "50"], ""),
        # The oldest job: the one furthest from the newest-first end of any listing.
        ("7b", "`jobs describe` of the oldest job", [*aiptrain_command(), "jobs", "describe", job_id(0)], ""),
        ("7c", "`jobs list --limit 10`", [*aiptrain_command(), "jobs", "list", "--limit", "10"],
         " Both sides print 10 jobs here, so only the history differs (in 7a the large home prints 50, "
         "the small one 10)."),
    ]
    rows = []
    for row_id, what, argv, extra_note in commands:
        shown = run_checked(argv, env=large_env).stdout
        if "describe" in argv and job_id(0) not in shown:
            raise BenchError(f"`jobs describe` did not show {job_id(0)}")
        paired = alternate(partial(time_command, argv, env=large_env), partial(time_command, argv, env=small_env),
                           ctx.runs(RUNS))
        rows.append(paired_row(RowResult(
            row_id=row_id, group="store-scale", unit="s",
            title=f"{what} with {large_count:,} jobs in the store (anchor: {SMALL} jobs), wall time",
            goal=ratio_max(1.5), commands=[ctx.show(argv, home=True) + f"   # home with {large_count:,} jobs"],
            anchor_commands=[ctx.show(argv, home=True) + f"   # home with {SMALL} jobs"],
            anchor_label=f"the same command with {SMALL} jobs in the store",
            notes=f"Each stored job is SUCCEEDED with its state history and {LOG_LINES_PER_JOB} log lines "
                  f"(jobs.db of the large home: {_size_mb(large_home / 'jobs.db')} MB). One warm-up pair."
                  + extra_note,
        ), paired))
    return rows


def _size_mb(path: Path) -> str:
    wal = path.with_name(path.name + "-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return f"{size / 1e6:.1f}"
