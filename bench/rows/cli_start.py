"""Row 1: how long the CLI takes to show its help, against importing click alone; and `import
aiptrain` (the Python API), against the CLI's `--help`.

The anchor is the floor any click CLI pays: the interpreter plus `import click`. What aiptrain
adds on top is its own modules (heavy ones are imported lazily, inside the commands). The Python
API loads nothing until a function runs, so importing it must cost no more than the help.
"""

from __future__ import annotations

from functools import partial

from bench.context import BenchContext
from bench.environment import PYTHON, aiptrain_command, interpreter_floor, isolated_env, time_command
from bench.harness import RowResult, alternate, paired_row, ratio_max

RUNS = 15
ANCHOR = [str(PYTHON), "-c", "import click"]
SUBJECTS = [
    ("1a", "`aiptrain --help`", ["--help"]),
    ("1b", "`aiptrain jobs submit training --help`", ["jobs", "submit", "training", "--help"]),
]


def run(ctx: BenchContext) -> list[RowResult]:
    home = ctx.cleanup.new_home("cli-start")
    env = isolated_env(home)
    floor = interpreter_floor(env, ctx.runs(5))
    rows = []
    for row_id, title, args in SUBJECTS:
        argv = [*aiptrain_command(), *args]
        paired = alternate(partial(time_command, argv, env=env), partial(time_command, ANCHOR, env=env),
                           ctx.runs(RUNS), warmup=2)
        rows.append(paired_row(RowResult(
            row_id=row_id,
            group="cli-start",
            title=f"CLI start: {title}, wall time",
            unit="s",
            goal=ratio_max(1.5),
            commands=[ctx.show(argv, home=True)],
            anchor_commands=[ctx.show(ANCHOR)],
            anchor_label="`python -c \"import click\"`",
            notes="Subprocess wall time, output discarded; 2 warm-up pairs not counted. For scale: a bare "
                  f"`python -c pass` took {floor:.3f} s (median of {ctx.runs(5)}, measured before the pairs).",
        ), paired))
    rows.append(_import_row(ctx, env, floor))
    return rows


def _import_row(ctx: BenchContext, env: dict[str, str], floor: float) -> RowResult:
    help_argv = [*aiptrain_command(), "--help"]
    import_argv = [str(PYTHON), "-c", "import aiptrain"]
    paired = alternate(partial(time_command, import_argv, env=env), partial(time_command, help_argv, env=env),
                       ctx.runs(RUNS), warmup=2)
    return paired_row(RowResult(
        row_id="1c",
        group="cli-start",
        title="Python API: `import aiptrain`, wall time",
        unit="s",
        goal=ratio_max(1.0),
        commands=[ctx.show(import_argv)],
        anchor_commands=[ctx.show(help_argv, home=True)],
        anchor_label="`aiptrain --help`",
        notes="Subprocess wall time; 2 warm-up pairs not counted. For scale: a bare `python -c pass` took "
              f"{floor:.3f} s.",
    ), paired)
