"""Row 8: peak memory of the CLI during a submit, and of an idle job supervisor.

- The CLI: `ru_maxrss` from `os.wait4` on the submit process, started by a small launcher
  (bench/scripts/peak_rss.py explains why). Linux reports the larger of the process's own peak
  and that of every descendant it waited for, so a cold submit includes the setuptools build
  child; the detached supervisor outlives the CLI and is not included.
- The supervisor: `VmHWM` (peak resident set) from /proc/PID/status of the job's supervisor
  (its pid is in the job store) while the job's only replica sleeps, after 2 s of idling.

The goals are absolute; `python -c "import click"` (the smallest click program) is measured
alongside for context. 1 MB = 10^6 bytes.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.context import BenchContext
from bench.environment import PYTHON, SCRIPTS, BenchError, aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, alternate, paired_row, value_max

RUNS = 3
PROJECT = "local-project"
IDLE_SECONDS = 2.0
SLEEPING_TRAINER_SECONDS = 60
ANCHOR = [str(PYTHON), "-c", "import click"]
_job_numbers = itertools.count()


@dataclass(frozen=True)
class PeakRss:
    megabytes: float
    launcher_megabytes: float  # the floor: the launcher's own resident set when it started the command


def peak_rss(ctx: BenchContext, argv: list[str], env: dict[str, str]) -> PeakRss:
    """Peak resident set of a command (and the children it waited for), via bench/scripts/peak_rss.py."""
    fd, report = tempfile.mkstemp(prefix="rss-", dir=ctx.scratch)
    os.close(fd)
    run_checked([str(PYTHON), str(SCRIPTS / "peak_rss.py"), report, *argv], env=env, timeout=300)
    maxrss_kib, exit_code, launcher_kib = (int(x) for x in Path(report).read_text().split())
    if exit_code != 0:
        raise BenchError(f"`{' '.join(argv)}` exited {exit_code}")
    return PeakRss(maxrss_kib * 1024 / 1e6, launcher_kib * 1024 / 1e6)


def submit_argv(ctx: BenchContext, job_id: str, *trainer_args: str) -> list[str]:
    return [*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
            str(ctx.package_path("noop")), "--module-name", "trainer.task", "--region", "us-central1",
            "--", *trainer_args]


def cli_submit(ctx: BenchContext, home: Path | None, floors: list[float]) -> float:
    """One submit's peak RSS; waits for the job afterwards (untimed) so jobs never pile up.
    `home` None: a fresh home, so the package is built (cold)."""
    home = home or ctx.cleanup.new_home("memory-cold")
    env = isolated_env(home)
    job_id = f"memory_{next(_job_numbers)}"
    peak = peak_rss(ctx, submit_argv(ctx, job_id), env)
    floors.append(peak.launcher_megabytes)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=300)
    return peak.megabytes


def idle_supervisor(ctx: BenchContext, home: Path) -> float:
    """VmHWM of the supervisor of a RUNNING job whose replica sleeps."""
    from aiptrain._backends.local.store import JobStore

    env = isolated_env(home)
    job_id = f"idle_{next(_job_numbers)}"
    run_checked(submit_argv(ctx, job_id, "--sleep", str(SLEEPING_TRAINER_SECONDS)), env=env)
    store = JobStore(home)
    try:
        deadline = time.monotonic() + 120
        record = store.get(PROJECT, job_id)
        while record.state.value != "RUNNING":
            if record.state.is_terminal or time.monotonic() > deadline:
                raise BenchError(f"job {job_id} did not reach RUNNING (it is {record.state.value})")
            time.sleep(0.1)
            record = store.get(PROJECT, job_id)
        time.sleep(IDLE_SECONDS)
        if record.supervisor_pid is None:
            raise BenchError(f"job {job_id} has no supervisor pid")
        peak = status_kb(record.supervisor_pid, "VmHWM") * 1024 / 1e6
    finally:
        store.close()
    run_checked([*aiptrain_command(), "jobs", "cancel", job_id], env=env)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=120, ok_codes=(11,))
    return peak


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise BenchError(f"/proc/{pid}/status has no {field}")


def run(ctx: BenchContext) -> list[RowResult]:
    home = ctx.cleanup.new_home("memory")
    anchor_env = isolated_env(ctx.cleanup.new_home("memory-anchor"))

    floors: list[float] = []

    def anchor() -> float:
        peak = peak_rss(ctx, ANCHOR, anchor_env)
        floors.append(peak.launcher_megabytes)
        return peak.megabytes

    runs = ctx.runs(RUNS)
    warm = alternate(lambda: cli_submit(ctx, home, floors), anchor, runs)  # the warm-up submit fills the cache
    cold = alternate(lambda: cli_submit(ctx, None, floors), anchor, runs, warmup=0)
    idle = alternate(lambda: idle_supervisor(ctx, home), anchor, runs, warmup=0)
    common = {"group": "memory", "unit": "MB", "anchor_commands": [ctx.show(ANCHOR)],
              "anchor_label": "`python -c \"import click\"`, for context"}
    return [
        paired_row(RowResult(
            row_id="8a", title="Peak RSS of the CLI during a submit, build cache warm",
            goal=value_max(150, "MB"), commands=[ctx.show(submit_argv(ctx, "memory_N"), home=True)],
            notes="`ru_maxrss` of the submit process (os.wait4 in bench/scripts/peak_rss.py, whose own "
                  f"resident set, the floor of these figures, was at most {max(floors):.1f} MB). "
                  "The goal judges the median.",
            **common,
        ), warm),
        paired_row(RowResult(
            row_id="8b", title="Peak RSS of the CLI during a submit, cold (package built)",
            goal=value_max(150, "MB"), commands=[ctx.show(submit_argv(ctx, "memory_N"), home=True)],
            notes="A fresh home per run: the figure is the larger of the CLI and its setuptools build child.",
            **common,
        ), cold),
        paired_row(RowResult(
            row_id="8c", title="Peak RSS (VmHWM) of an idle job supervisor",
            goal=value_max(80, "MB"),
            commands=[ctx.show(submit_argv(ctx, "idle_N", "--sleep", str(SLEEPING_TRAINER_SECONDS)), home=True),
                      "grep VmHWM /proc/$SUPERVISOR_PID/status   # pid from the job store, 2 s after RUNNING"],
            notes="Read while the job is RUNNING and its replica sleeps; the job is then cancelled.",
            **common,
        ), idle),
    ]
