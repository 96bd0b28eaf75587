"""The benchmark harness itself, on a trivial pair of commands and one cheap real row.

Benchmarks are not part of `make test`; this only checks that `make bench` can work: pairs
alternate, statistics and goals are computed, and the markdown table carries ratio and goal
columns. No timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

from bench.environment import REPO, isolated_env, time_command
from bench.harness import RowResult, Stats, alternate, paired_row, percentile, ratio_max, value_eq
from bench.report import render_markdown

META = {
    "date": "2000-01-01 00:00 UTC",
    "machine": {"cpu_model": "test", "cores": 2, "memory_gb": 1.0, "python": "3.11", "os": "test",
                "load_average_at_start": [0.0, 0.0, 0.0]},
    "git": {"commit": "0" * 40, "uncommitted_paths": 0},
    "quick": True,
    "wall_seconds": 1.0,
    "command": "test",
}
TABLE_HEADER = "| # | Row | aiptrain | Anchor | Ratio | Goal | Meets goal | Runs |"


def test_trivial_pair_alternates_and_renders_a_table_with_ratio_and_goal(tmp_path: Path) -> None:
    env = isolated_env(tmp_path / "home")
    subject = partial(time_command, [sys.executable, "-c", "pass"], env=env)
    anchor = partial(time_command, [sys.executable, "-c", "import json"], env=env)
    paired = alternate(subject, anchor, 2, warmup=0)
    assert len(paired.subject.samples) == len(paired.anchor.samples) == 2
    assert paired.ratio > 0

    met = paired_row(RowResult(row_id="1", group="t", title="trivial pair", unit="s", goal=ratio_max(1e6),
                               commands=["python -c pass"], anchor_commands=["python -c 'import json'"]), paired)
    missed = paired_row(RowResult(row_id="2", group="t", title="impossible goal", unit="s",
                                  goal=ratio_max(1e-9)), paired)
    markdown = render_markdown(META, [met, missed])

    assert TABLE_HEADER in markdown
    line_1 = next(line for line in markdown.splitlines() if line.startswith("| 1 |"))
    assert "x (pairs)" in line_1 and "<= 1e+06x" in line_1 and "| yes |" in line_1
    line_2 = next(line for line in markdown.splitlines() if line.startswith("| 2 |"))
    assert "**MISSES GOAL**" in line_2
    assert "python -c pass" in markdown


def test_statistics_and_goals() -> None:
    values = [float(v) for v in range(1, 201)]
    assert percentile(values, 0.5) == 100.0
    assert percentile(values, 0.95) == 190.0
    stats = Stats.of([3.0, 1.0, 2.0])
    assert (stats.median, stats.min, stats.max) == (2.0, 1.0, 3.0)
    assert value_eq(0, "bytes").met_by(Stats.of([0.0, 0.0]), None) is True
    assert value_eq(0, "bytes").met_by(Stats.of([0.0, 10.0]), None) is False


def test_one_real_row_quick_writes_markdown_and_json(tmp_path: Path) -> None:
    markdown, results = tmp_path / "BENCH.md", tmp_path / "results.json"
    command = [sys.executable, "-m", "bench.run", "--only", "cli-start", "--quick",
               "--output", str(markdown), "--json", str(results)]
    completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr

    text = markdown.read_text()
    assert TABLE_HEADER in text
    row = next(line for line in text.splitlines() if line.startswith("| 1a |"))
    assert "x (pairs)" in row and "<= 1.5x" in row
    assert "Quick mode" in text
    rows = json.loads(results.read_text())["rows"]
    assert [r["row_id"] for r in rows] == ["1a", "1b", "1c"]
    assert all(r["ratio"] is not None for r in rows)
    assert [r["goal"]["text"] for r in rows] == ["<= 1.5x", "<= 1.5x", "<= 1x"]

    # The markdown is reproducible from the JSON alone.
    rerender = [sys.executable, "-m", "bench.run", "--render-only", "--output", str(tmp_path / "again.md"),
                "--json", str(results)]
    subprocess.run(rerender, cwd=REPO, check=True, timeout=30)
    assert (tmp_path / "again.md").read_text() == text
