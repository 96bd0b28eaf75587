"""Row 9: training speed of trainer_template on the digits data, CPU only, and what each
replica's share of the machine (`AIPTRAIN_LOCAL_CPU_SHARE`) does to it.

The data is made once with `python -m trainer.make_data` (4 training shards). 9a-9c are
`aiptrain local train` of the template, alone or as chief + 1 worker (MultiWorkerMirroredStrategy,
the global batch of 64 split between the two), with checkpoints and evaluations pushed past
the end so the progress windows measure training steps only. The trainer logs steps_per_sec
every 100 steps; a run's figure is the median of its windows after the first (which includes
tracing the step function). The single replica, the two replicas with the share on (the
default) and with it off (every replica sizes its pools for the whole machine, as before the
share existed) take turns, in a rotating order; the single replica is the anchor of both
two-replica rows, so their ratios are how well one more worker scales on this machine.

9d and 9e submit a STANDARD_1 job of the template (master, 4 workers, 3 parameter servers:
ParameterServerStrategy, 8 processes) to the local backend with `--stream-logs`: its wall time
from submit to SUCCEEDED, and its chief's steps/s, with the share on against off, alternated.
"""

from __future__ import annotations

import itertools
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.context import BenchContext
from bench.environment import PYTHON, BenchError, aiptrain_command, isolated_env, run_checked
from bench.harness import Paired, RowResult, Stats, alternate, paired_row, ratio_min

RUNS = 3
STEPS = 1000
QUICK_STEPS = 300
LOG_STEPS = 100
STANDARD_1_RUNS = 3
STANDARD_1_STEPS = 2000
_WINDOW = re.compile(r"\[(?:chief|master):0\] step (\d+)/\d+ .*steps_per_sec=([\d.]+)")
_SHARE = "AIPTRAIN_LOCAL_CPU_SHARE"
LATENCY_NOTE = (
    " Why the share does not lift 9b towards 0.5x on this machine: the two replicas are not short of CPU. While "
    "they train, each process uses about 15% of a core (top); every step waits on collective all-reduces over "
    "gRPC (the gradients, then the step's totals, which the template reduces to keep its replicas in step), and "
    "on these 2 shared cores a bare 2-process MultiWorkerMirroredStrategy all-reduce of 1,000 floats, with no "
    "model at all, ran at 300-490 per second unpinned (measured by hand). Two of them per step bound the "
    "template near 150-250 steps/s before any compute, against about 800 steps/s for one replica. Sizing the "
    "thread pools changes nothing there (9b against 9c), and pinning each replica to one core made it slower "
    "(0.6x, measured while choosing the rule), so a replica is pinned only with two cores or more."
)
_job_numbers = itertools.count()


def template_ready(ctx: BenchContext) -> bool:
    package = ctx.package_path("template")
    return all((package / name).is_file() for name in ("task.py", "make_data.py"))


def make_data(ctx: BenchContext, env: dict[str, str]) -> Path:
    data = ctx.scratch / "digits"
    run_checked([str(PYTHON), "-m", "trainer.make_data", "--output-dir", str(data), "--shards", "4"],
                env={**env, "PYTHONPATH": str(ctx.project("template"))}, cwd=ctx.project("template"))
    return data


def trainer_args(data: Path, steps: int) -> list[str]:
    return ["--train-files", f"{data}/train-*.csv", "--eval-files", f"{data}/eval-*.csv",
            "--train-steps", str(steps), "--log-steps", str(LOG_STEPS),
            "--checkpoint-steps", str(10 * steps), "--throttle-secs", "100000"]


def train_argv(ctx: BenchContext, data: Path, steps: int, distributed: bool, job_dir: str) -> list[str]:
    cluster = ["--distributed", "--worker-count", "1", "--parameter-server-count", "0"] if distributed else []
    return [*aiptrain_command(), "local", "train", "--package-path", str(ctx.package_path("template")),
            "--module-name", "trainer.task", *cluster, "--job-dir", job_dir, "--", *trainer_args(data, steps)]


def standard_1_argv(ctx: BenchContext, data: Path, steps: int, job_id: str) -> list[str]:
    return [*aiptrain_command(), "jobs", "submit", "training", job_id, "--package-path",
            str(ctx.package_path("template")), "--module-name", "trainer.task", "--region", "us-central1",
            "--scale-tier", "standard-1", "--job-dir", f"gs://bench-output/{job_id}", "--stream-logs", "--",
            *trainer_args(data, steps)]


def steps_per_second(output: str) -> float:
    """The median steps/s of the primary's progress windows, without the first one."""
    windows = [(int(step), float(rate)) for step, rate in _WINDOW.findall(output)]
    later = [rate for step, rate in windows if step > LOG_STEPS]
    if not later:
        raise BenchError("no steps_per_sec lines after the first window in the trainer's output:\n"
                         + output[-2000:])
    return statistics.median(later)


def rotate(measures: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """`runs` rounds of every measure, each round starting one later than the last."""
    names = list(measures)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_number in range(runs):
        start = round_number % len(names)
        for name in names[start:] + names[:start]:
            samples[name].append(measures[name]())
    return samples


def paired_rounds(subject: list[float], anchor: list[float]) -> Paired:
    ratios = [s / a for s, a in zip(subject, anchor, strict=True)]
    return Paired(Stats.of(subject), Stats.of(anchor), statistics.median(ratios))


def _local_train_rows(ctx: BenchContext, env: dict[str, str], data: Path) -> list[RowResult]:
    steps = QUICK_STEPS if ctx.quick else STEPS

    def measure(distributed: bool, share: str) -> Callable[[], float]:
        def once() -> float:
            job_dir = tempfile.mkdtemp(prefix="train-job-", dir=ctx.scratch)
            completed = run_checked(train_argv(ctx, data, steps, distributed, job_dir),
                                    env={**env, _SHARE: share}, timeout=600)
            # The template logs its progress with Python logging, which `local train` keeps on stderr.
            return steps_per_second(completed.stdout + completed.stderr)
        return once

    samples = rotate({"single": measure(False, "on"), "on": measure(True, "on"), "off": measure(True, "off")},
                     ctx.runs(RUNS))
    shown = "$SCRATCH/train-job-…"
    single_cmd = ctx.show(train_argv(ctx, data, steps, False, shown), home=True)
    on_cmd = ctx.show(train_argv(ctx, data, steps, True, shown), home=True)
    off_cmd = ctx.show(train_argv(ctx, data, steps, True, shown), home=True, env={_SHARE: "off"})
    notes = (f"{steps} steps, steps_per_sec logged every {LOG_STEPS} steps; per run the median of the windows "
             "after the first. `--job-dir` is a fresh directory per run. The single replica, the two replicas "
             "with the CPU share on and with it off take turns in a rotating order.")
    pair_note = (" The ratio is 2-replica / 1-replica steps/s of the same round (each step of the 2-replica job "
                 "processes the same global batch).")
    anchor = "the same training with 1 replica (row 9a)"
    return [
        RowResult(row_id="9a", group="training", title="Training trainer_template, 1 replica (CPU), steps/s "
                  "(higher is better)", unit="steps/s", subject=Stats.of(samples["single"]), commands=[single_cmd],
                  notes=notes),
        paired_row(RowResult(
            row_id="9b", group="training", unit="steps/s", commands=[on_cmd], anchor_commands=[single_cmd],
            title="Training trainer_template, chief + 1 worker (CPU), each replica its share of the cores, "
                  "steps/s (higher is better)",
            anchor_label=anchor, goal=ratio_min(0.5), notes=notes + pair_note + LATENCY_NOTE,
        ), paired_rounds(samples["on"], samples["single"])),
        paired_row(RowResult(
            row_id="9c", group="training", unit="steps/s", commands=[off_cmd], anchor_commands=[single_cmd],
            title="Training trainer_template, chief + 1 worker (CPU), `AIPTRAIN_LOCAL_CPU_SHARE=off` (every "
                  "replica sizes its pools for the whole machine, as before the share), steps/s (higher is better)",
            anchor_label=anchor, notes=notes + pair_note,
        ), paired_rounds(samples["off"], samples["single"])),
    ]


def _standard_1_rows(ctx: BenchContext, env: dict[str, str], data: Path) -> list[RowResult]:
    steps = QUICK_STEPS if ctx.quick else STANDARD_1_STEPS
    rates: dict[str, list[float]] = {"on": [], "off": []}

    def measure(share: str) -> Callable[[], float]:
        def once() -> float:
            job_id = f"standard_1_{share}_{next(_job_numbers)}"
            started = time.perf_counter()
            completed = run_checked(standard_1_argv(ctx, data, steps, job_id), env={**env, _SHARE: share},
                                    timeout=1200)
            elapsed = time.perf_counter() - started
            rates[share].append(steps_per_second(completed.stdout + completed.stderr))
            return elapsed
        return once

    # The warm-up run fills the build cache (the package is built once, as for any re-submit).
    timed = alternate(measure("on"), measure("off"), ctx.runs(STANDARD_1_RUNS), warmup=1, warm_anchor_only=True)
    for samples in rates.values():
        del samples[: len(samples) - ctx.runs(STANDARD_1_RUNS)]  # the warm-up's rate goes
    on_cmd = ctx.show(standard_1_argv(ctx, data, steps, "standard_1_…"), home=True)
    off_cmd = ctx.show(standard_1_argv(ctx, data, steps, "standard_1_…"), home=True, env={_SHARE: "off"})
    notes = (f"A STANDARD_1 job (master and 4 workers n1-highcpu-8, 3 parameter servers n1-standard-4: 52 vCPUs "
             f"asked for) of trainer_template, {steps} steps, on the local backend with its trainers in this "
             "interpreter (AIPTRAIN_LOCAL_PYTHON); one home for the row, its build cache filled by a warm-up job. "
             "The anchor is the same job with `AIPTRAIN_LOCAL_CPU_SHARE=off`, the code path before the share.")
    return [
        paired_row(RowResult(
            row_id="9d", group="training", unit="s", commands=[on_cmd], anchor_commands=[off_cmd],
            title="STANDARD_1 job of trainer_template (8 replicas), submit to SUCCEEDED, wall time",
            anchor_label="the same job with the CPU share off", notes=notes,
        ), timed),
        paired_row(RowResult(
            row_id="9e", group="training", unit="steps/s", commands=[on_cmd], anchor_commands=[off_cmd],
            title="STANDARD_1 job of trainer_template (8 replicas), the chief's steps/s (higher is better)",
            anchor_label="the same job with the CPU share off",
            notes=notes + " Per run the median of the chief's windows after the first; the ratio pairs the runs "
                          "of the wall-time row.",
        ), paired_rounds(rates["on"], rates["off"])),
    ]


def run(ctx: BenchContext) -> list[RowResult]:
    if not template_ready(ctx):
        missing = "trainer_template/ has no trainer.task or trainer.make_data yet."
        return [RowResult(row_id=row_id, group="training", title="Training trainer_template", unit="steps/s",
                          status="not measured", notes=missing) for row_id in ("9a", "9b", "9c", "9d", "9e")]
    env = isolated_env(ctx.cleanup.new_home("training"))
    data = make_data(ctx, env)
    return _local_train_rows(ctx, env, data) + _standard_1_rows(ctx, env, data)
