"""`python -m bench.run [--only GROUP ...] [--quick]`: run the benchmarks, write docs/benchmarks.md.

Groups run one after another (never in parallel: they would slow each other). A group that
fails is reported as such in the table and the others still run. Whatever the run started
(job supervisors, servers) is stopped at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from bench.context import BenchContext
from bench.environment import REPO, Cleanup, precompile_aiptrain, scratch_space
from bench.harness import RowResult
from bench.report import git_facts, machine_facts, read_json, render_markdown, write_json
from bench.rows import RowGroup, all_groups

DEFAULT_MARKDOWN = REPO / "docs" / "benchmarks.md"
DEFAULT_JSON = REPO / "bench" / "results.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = [group.name for group in all_groups()]
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=names, metavar="GROUP",
                        help=f"run only this group (repeatable): {', '.join(names)}")
    parser.add_argument("--quick", action="store_true",
                        help="one repetition per row and shorter workloads (checks the harness, not for comparison)")
    parser.add_argument("--row", action="append", default=[], metavar="ID",
                        help="measure only this row (repeatable; groups that cannot measure rows alone run whole)")
    parser.add_argument("--output", type=Path, default=DEFAULT_MARKDOWN, help="markdown to write")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="results JSON to write")
    parser.add_argument("--render-only", action="store_true", help="rewrite the markdown from --json, measure nothing")
    parser.add_argument("--keep-scratch", action="store_true", help="keep the scratch directory for inspection")
    return parser.parse_args(argv)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # Turn SIGTERM into an exception so the `finally` blocks stop what the run started.
    raise SystemExit(128 + signum)


def run_group(group: RowGroup, ctx: BenchContext) -> list[RowResult]:
    started = time.perf_counter()
    print(f"[bench] {group.number}. {group.title} ...", file=sys.stderr, flush=True)
    try:
        rows = group.run(ctx)
    except Exception as error:
        traceback.print_exc()
        rows = [RowResult(row_id=group.number, group=group.name, title=group.title, unit="",
                          status="failed", notes=f"Measurement failed: {type(error).__name__}: {error}")]
    print(f"[bench] {group.number}. {group.title}: {time.perf_counter() - started:.0f} s", file=sys.stderr,
          flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    if options.render_only:
        meta, rows = read_json(options.json)
        options.output.write_text(render_markdown(meta, rows))
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    groups = [g for g in all_groups() if not options.only or g.name in options.only]
    precompile_aiptrain()
    started = time.perf_counter()
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_facts(),
        "git": git_facts(),
        "quick": options.quick,
        "groups": [g.name for g in groups],
        "command": " ".join(["python -m bench.run", *(argv if argv is not None else sys.argv[1:])]),
    }
    rows: list[RowResult] = []
    with scratch_space(keep=options.keep_scratch) as scratch:
        cleanup = Cleanup(scratch)
        ctx = BenchContext(scratch=scratch, cleanup=cleanup, quick=options.quick, rows=frozenset(options.row))
        try:
            for group in groups:
                rows.extend(run_group(group, ctx))
        finally:
            for problem in cleanup.stop_all():
                print(f"[bench] cleanup: {problem}", file=sys.stderr)
    meta["wall_seconds"] = time.perf_counter() - started
    write_json(options.json, meta, rows)
    options.output.write_text(render_markdown(meta, rows))
    print(f"[bench] wrote {options.output} and {options.json} in {meta['wall_seconds'] / 60:.1f} min",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
