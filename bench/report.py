"""The report: machine facts, results JSON, and the docs/benchmarks.md rendering of both.

The markdown is rendered from the JSON alone (`python -m bench.run --render-only`), so the
committed table can always be reproduced from the committed results.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from bench.environment import REPO
from bench.harness import RATIO_METHOD_TEXT, RowResult, Stats

MISSES = "**MISSES GOAL**"


def machine_facts() -> dict[str, Any]:
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": round(_meminfo_kb("MemTotal") / 1024 / 1024, 1),
        "python": platform.python_version(),
        "os": platform.platform(),
        "load_average_at_start": _load_average(),
    }


def git_facts() -> dict[str, Any]:
    def git(*args: str) -> str:
        completed = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return completed.stdout.strip()

    changed = [line for line in git("status", "--porcelain").splitlines() if line.strip()]
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_paths": len(changed)}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _meminfo_kb(key: str) -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def write_json(path: Path, meta: dict[str, Any], rows: list[RowResult]) -> None:
    document = {"meta": meta, "rows": [row.to_json() for row in rows]}
    path.write_text(json.dumps(document, indent=1) + "\n")


def read_json(path: Path) -> tuple[dict[str, Any], list[RowResult]]:
    document = json.loads(path.read_text())
    return document["meta"], [RowResult.from_json(row) for row in document["rows"]]


# -- markdown ----------------------------------------------------------------------------------


def render_markdown(meta: dict[str, Any], rows: list[RowResult]) -> str:
    machine = meta["machine"]
    parts = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`.venv/bin/python -m bench.run`) from `bench/results.json`; do not edit by "
        "hand. Every figure is compared with an anchor measured in the same run on the same machine.",
        "",
        *_quick_warning(meta),
        "## Machine and run",
        "",
        f"- CPU: {machine['cpu_model']}, {machine['cores']} cores; memory {machine['memory_gb']} GB",
        f"- Python {machine['python']}; {machine['os']}",
        f"- Load average when the run started (1/5/15 min): "
        f"{' / '.join(str(x) for x in machine.get('load_average_at_start', []))} "
        "(the machine is shared; see Method)",
        f"- Date: {meta['date']}; total wall time of the run: {meta['wall_seconds'] / 60:.1f} min",
        f"- Commit: `{meta['git']['commit']}`"
        + (f" (the working tree had {meta['git']['uncommitted_paths']} uncommitted paths)"
           if meta["git"].get("uncommitted_paths") else ""),
        f"- Command: `{meta['command']}`",
        "",
        "## Results",
        "",
        "Figures are median [min, max] over the runs. Ratio = subject / anchor; *pairs* = median of "
        "per-pair ratios of alternated runs, *medians* = ratio of the medians. Rows that miss their goal "
        f"say {MISSES}.",
        "",
        "| # | Row | aiptrain | Anchor | Ratio | Goal | Meets goal | Runs |",
        "|---|---|---|---|---|---|---|---|",
        *(_table_line(row) for row in rows),
        "",
        "## Rows in detail",
        "",
    ]
    for row in rows:
        parts.extend(_detail(row))
    parts.extend(_method())
    return "\n".join(parts).rstrip() + "\n"


def _quick_warning(meta: dict[str, Any]) -> list[str]:
    if not meta.get("quick"):
        return []
    return ["> **Quick mode**: one repetition per row and shortened workloads. These figures check that the "
            "harness works; they are not for comparison.", ""]


def figure(stats: Stats | None, unit: str) -> str:
    if stats is None:
        return "—"
    if len(stats.samples) == 1:
        return f"{_number(stats.median)} {unit}"
    return f"{_number(stats.median)} [{_number(stats.min)}, {_number(stats.max)}] {unit}"


def _number(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 10_000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _ratio(row: RowResult) -> str:
    if row.ratio is None:
        return "—"
    return f"{row.ratio:.3g}x ({row.ratio_method})"


def _verdict(row: RowResult) -> str:
    if row.status == "failed":
        return "**NOT MEASURED** (failed)"
    if row.status == "not measured":
        return "not measured yet"
    met = row.meets_goal
    if met is None:
        return "— (no goal)"
    return "yes" if met else MISSES


def _table_line(row: RowResult) -> str:
    runs = len(row.subject.samples) if row.subject else 0
    cells = [
        row.row_id,
        row.title,
        figure(row.subject, row.unit),
        figure(row.anchor, row.unit),
        _ratio(row),
        row.goal.text if row.goal else "—",
        _verdict(row),
        str(runs) if runs else "—",
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _detail(row: RowResult) -> list[str]:
    lines = [f"### {row.row_id}. {row.title}", ""]
    if row.status != "measured":
        lines += [f"Status: {row.status}.", ""]
    else:
        lines.append(f"- aiptrain: {figure(row.subject, row.unit)}; samples {_samples(row.subject)}")
        if row.anchor is not None:
            lines.append(f"- anchor ({row.anchor_label or 'see commands'}): {figure(row.anchor, row.unit)}; "
                         f"samples {_samples(row.anchor)}")
        if row.ratio is not None:
            lines.append(f"- ratio: {_ratio(row)}, {RATIO_METHOD_TEXT[row.ratio_method]}")
        lines += [f"- goal: {row.goal.text if row.goal else 'none'}; {_verdict(row)}", ""]
    if row.notes:
        lines += [row.notes, ""]
    if row.commands:
        lines += ["aiptrain:", "", "```sh", *row.commands, "```", ""]
    if row.anchor_commands:
        lines += ["Anchor:", "", "```sh", *row.anchor_commands, "```", ""]
    return lines


def _samples(stats: Stats | None) -> str:
    if stats is None:
        return "—"
    return ", ".join(_number(s) for s in stats.samples)


def _method() -> list[str]:
    return [
        "## Method",
        "",
        "- Subject (aiptrain) and anchor runs alternate within the run, flipping which goes first in each "
        "pair, so a busy phase of the shared machine slows both; warm-up runs are discarded. Each row "
        "says how many pairs it ran; counts were chosen to fit the whole run in 15 minutes on 2 cores. "
        "Alternation cancels slow phases only partly: on a busy machine a ratio close to its goal can "
        "land on either side of it from one full run to the next, so read the min and max too.",
        "- Every subprocess gets a fresh temporary `AIPTRAIN_HOME` (rows that need state share one home "
        "within the row, as stated) and an environment without `AIPTRAIN_*`/gcloud settings.",
        "- aiptrain's modules are compiled to bytecode before the first row, as `pip install` does for an "
        "installed copy (the run's environment may forbid writing bytecode, which would make every "
        "aiptrain process measured compile its modules from source).",
        "- Trainer projects (trainer_template/, bench/trainers/) are copied to a scratch directory first, "
        "so every side builds exactly the same tree and nothing is written into the repository. "
        "`$SCRATCH` in the commands is that directory.",
        "- Timings are wall-clock (`time.perf_counter`) around the whole subprocess unless a row says "
        "otherwise; memory is `ru_maxrss` from `os.wait4` (CLI) or `VmHWM` from `/proc/PID/status` "
        "(supervisor).",
        "- Reproduce one group with `.venv/bin/python -m bench.run --only GROUP` "
        "(cli-start, packaging, dry-run, upload, log-latency, engine-overhead, store-scale, memory, "
        "training); `--row ID` measures single rows of groups that allow it (long-running); `--output` and "
        "`--json` write elsewhere than docs/benchmarks.md and bench/results.json.",
        "",
    ]
