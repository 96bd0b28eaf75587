"""What a trainer reports through cloudml-hypertune, read back from its metric file.

The library (`hypertune.HyperTune`) writes to the file named by CLOUD_ML_HP_METRIC_FILE
(default `/tmp/hypertune/output.metrics`). Every report rewrites the whole file with the last 100
reports, one JSON object per line, every value a string:

    {"checkpoint_path": "", "global_step": "100", "timestamp": 1700000000.1,
     "training/hptuning/metric": "0.93", "trial": "3"}

The metric's key is its tag; `global_step` is "0" when the trainer gave none. A reader may see
the file half-written (it is truncated, then written): a line that does not parse is left for
the next read. Reports are remembered across reads, so the 100-line window loses nothing that
was read in time.

A trial that reported nothing through cloudml-hypertune is ranked, as on the service, by the last
value of the tag in the TensorFlow summary events it wrote under its output directory
(`read_summary_metric`, which runs `summary_events.py` with the trial's own Python).
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiptrain._replicas.system_trust import trusting

METRIC_FILE_VARIABLE = "CLOUD_ML_HP_METRIC_FILE"
_SUMMARY_SCRIPT = Path(__file__).with_name("summary_events.py")
# Importing TensorFlow on a busy machine takes a while; reading the events themselves does not.
_SUMMARY_READ_TIMEOUT_SECONDS = 300.0


class SummaryReadError(Exception):
    """The trial's summary events could not be read (no TensorFlow in its Python, a timeout...)."""


@dataclass(frozen=True)
class MetricReport:
    step: int
    value: float
    timestamp: float


def parse_report(line: str, tag: str) -> MetricReport | None:
    """The report a line holds for `tag`; None for other tags, partial lines or bad values."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or tag not in record:
        return None
    try:
        value = float(record[tag])
        step = int(float(record.get("global_step") or 0))
        timestamp = float(record.get("timestamp") or 0.0)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value):
        return None
    return MetricReport(step, value, timestamp)


class MetricFile:
    """One trial's metric file, read incrementally while the trial runs."""

    def __init__(self, path: Path, tag: str) -> None:
        self.path = path
        self.tag = tag
        self._seen: set[str] = set()
        self._reports: list[MetricReport] = []

    def read(self) -> list[MetricReport]:
        """Reports that appeared since the last read, in the order they were made."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        new: list[MetricReport] = []
        for line in text.splitlines():
            if not line.strip() or line in self._seen:
                continue
            report = parse_report(line, self.tag)
            if report is None:
                if _is_complete_json(line):
                    self._seen.add(line)  # another tag's report: never ours
                continue
            self._seen.add(line)
            new.append(report)
        self._reports.extend(new)
        return new

    @property
    def reports(self) -> list[MetricReport]:
        return list(self._reports)

    @property
    def final(self) -> MetricReport | None:
        """The last report for the tag: the trial's final metric."""
        return self._reports[-1] if self._reports else None


def _is_complete_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def read_summary_metric(
    python: str, directory: str, tag: str, env: Mapping[str, str], *, timeout: float = _SUMMARY_READ_TIMEOUT_SECONDS
) -> MetricReport | None:
    """The last value of `tag` in the summary events under `directory` (local or gs://), or None.

    Runs with `python` (the trial's interpreter, which has TensorFlow) and `env` (the trial's
    environment, through which gs:// reaches the job's storage). Raises SummaryReadError.
    """
    try:
        result = subprocess.run(
            trusting([python, str(_SUMMARY_SCRIPT), directory, tag], env),  # TensorFlow < 2.4 on gs:// needs it
            env=dict(env), capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SummaryReadError(f"could not read the summary events under {directory}: {error}") from None
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        last = next((line for line in reversed(result.stderr.splitlines()) if line.strip()), "no output")
        raise SummaryReadError(f"could not read the summary events under {directory}: {last.strip()}")
    try:
        found = json.loads(lines[-1])
        if not found:
            return None
        value = float(found["value"])
        report = MetricReport(int(found["step"]), value, float(found["wall_time"]))
    except (ValueError, KeyError, TypeError) as error:
        raise SummaryReadError(f"unexpected answer from the summary reader: {lines[-1]!r} ({error})") from None
    return report if math.isfinite(value) else None
