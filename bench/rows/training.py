"""Row 9: training speed of trainer_template on the digits data, CPU only, for reference.

The data is made once with `python -m trainer.make_data` (4 training shards). Each run is
`aiptrain local train` of the template, alone or as chief + 1 worker (MultiWorkerMirroredStrategy,
the global batch of 64 split between the two), with checkpoints and evaluations pushed past
the end so the progress windows measure training steps only. The trainer logs steps_per_sec
every 100 steps; a run's figure is the median of its windows after the first (which includes
tracing the step function). The two configurations alternate; the single replica is the
anchor of the two-replica row, so its ratio is how well one more worker scales on 2 cores.
"""

from __future__ import annotations

import re
import statistics
import tempfile
from pathlib import Path

from bench.context import BenchContext
from bench.environment import PYTHON, BenchError, aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, Stats, alternate, paired_row

RUNS = 2
STEPS = 1000
QUICK_STEPS = 300
LOG_STEPS = 100
_WINDOW = re.compile(r"\[(?:chief|master):0\] step (\d+)/\d+ .*steps_per_sec=([\d.]+)")


def template_ready(ctx: BenchContext) -> bool:
    package = ctx.package_path("template")
    return all((package / name).is_file() for name in ("task.py", "make_data.py"))


def make_data(ctx: BenchContext, env: dict[str, str]) -> Path:
    data = ctx.scratch / "digits"
    run_checked([str(PYTHON), "-m", "trainer.make_data", "--output-dir", str(data), "--shards", "4"],
                env={**env, "PYTHONPATH": str(ctx.project("template"))}, cwd=ctx.project("template"))
    return data


def train_argv(ctx: BenchContext, data: Path, steps: int, distributed: bool, job_dir: str) -> list[str]:
    cluster = ["--distributed", "--worker-count", "1", "--parameter-server-count", "0"] if distributed else []
    return [*aiptrain_command(), "local", "train", "--package-path", str(ctx.package_path("template")),
            "--module-name", "trainer.task", *cluster, "--job-dir", job_dir, "--",
            "--train-files", f"{data}/train-*.csv", "--eval-files", f"{data}/eval-*.csv",
            "--train-steps", str(steps), "--log-steps", str(LOG_STEPS),
            "--checkpoint-steps", str(10 * steps), "--throttle-secs", "100000"]


def steps_per_second(output: str) -> float:
    """The median steps/s of the primary's progress windows, without the first one."""
    windows = [(int(step), float(rate)) for step, rate in _WINDOW.findall(output)]
    later = [rate for step, rate in windows if step > LOG_STEPS]
    if not later:
        raise BenchError("no steps_per_sec lines after the first window in the trainer's output:\n"
                         + output[-2000:])
    return statistics.median(later)


def run(ctx: BenchContext) -> list[RowResult]:
    titles = ("9a", "Training trainer_template, 1 replica (CPU), steps/s (higher is better)"), \
        ("9b", "Training trainer_template, chief + 1 worker (CPU), steps/s (higher is better)")
    if not template_ready(ctx):
        return [RowResult(row_id=row_id, group="training", title=title, unit="steps/s", status="not measured",
                          notes="trainer_template/ has no trainer.task or trainer.make_data yet.")
                for row_id, title in titles]
    env = isolated_env(ctx.cleanup.new_home("training"))
    data = make_data(ctx, env)
    steps = QUICK_STEPS if ctx.quick else STEPS
    single_samples: list[float] = []

    def measure(distributed: bool) -> float:
        job_dir = tempfile.mkdtemp(prefix="train-job-", dir=ctx.scratch)
        completed = run_checked(train_argv(ctx, data, steps, distributed, job_dir), env=env, timeout=600)
        # The template logs its progress with Python logging, which `local train` keeps on stderr.
        output = completed.stdout + completed.stderr
        rate = steps_per_second(output)
        if not distributed:
            single_samples.append(rate)
        return rate

    # No warm-up runs: start-up costs (loading TensorFlow, tracing) stay out of the windows anyway.
    paired = alternate(lambda: measure(True), lambda: measure(False), ctx.runs(RUNS), warmup=0)
    single_cmd = ctx.show(train_argv(ctx, data, steps, False, "$SCRATCH/train-job-…"), home=True)
    dist_cmd = ctx.show(train_argv(ctx, data, steps, True, "$SCRATCH/train-job-…"), home=True)
    notes = (f"{steps} steps, steps_per_sec logged every {LOG_STEPS} steps; per run the median of the windows "
             "after the first. No goal: recorded for reference. `--job-dir` is a fresh directory per run.")
    return [
        RowResult(row_id="9a", group="training", title=titles[0][1], unit="steps/s",
                  subject=Stats.of(single_samples), commands=[single_cmd], notes=notes),
        paired_row(RowResult(
            row_id="9b", group="training", title=titles[1][1], unit="steps/s", commands=[dist_cmd],
            anchor_commands=[single_cmd], anchor_label="the same training with 1 replica (row 9a)",
            notes=notes + " The ratio is 2-replica / 1-replica steps/s of alternated runs (each step of the "
                          "2-replica job processes the same global batch).",
        ), paired),
    ]
