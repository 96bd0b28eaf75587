"""Measuring: samples and their statistics, A/B alternation, goals and row results.

A row compares a subject (aiptrain) with an anchor. Subject and anchor runs alternate within
the run (S A, A S, S A, ...) so slow phases of a shared machine hit both; the ratio is then the
median of the per-pair ratios. Rows whose two sides cannot be paired (an analytic anchor, an
absolute goal) use the ratio of the medians instead; each row says which.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

RatioMethod = Literal["pairs", "medians", "none"]
GoalKind = Literal["ratio_max", "ratio_min", "value_max", "value_eq"]
RowStatus = Literal["measured", "not measured", "failed"]

RATIO_METHOD_TEXT = {
    "pairs": "median of per-pair ratios",
    "medians": "ratio of medians",
    "none": "no ratio",
}


@dataclass(frozen=True)
class Stats:
    """The samples of one side of a row, in the order they were taken."""

    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        return cls(tuple(float(s) for s in samples))

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.min, "max": self.max, "samples": list(self.samples)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Stats:
        return cls.of(data["samples"])


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (p95 of 200 values is the 190th smallest): no interpolation."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Goal:
    """What a row must achieve. `ratio_*` goals judge the ratio, `value_*` ones the subject's median."""

    kind: GoalKind
    limit: float
    text: str  # as shown in the table, e.g. "<= 1.5x"

    def met_by(self, subject: Stats | None, ratio: float | None) -> bool | None:
        if self.kind in ("ratio_max", "ratio_min"):
            if ratio is None:
                return None
            return ratio <= self.limit if self.kind == "ratio_max" else ratio >= self.limit
        if subject is None:
            return None
        if self.kind == "value_max":
            return subject.median <= self.limit
        # value_eq judges every sample: one re-upload is one too many.
        return all(sample == self.limit for sample in subject.samples)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Goal | None:
        return None if data is None else cls(data["kind"], float(data["limit"]), data["text"])


def ratio_max(limit: float) -> Goal:
    return Goal("ratio_max", limit, f"<= {limit:g}x")


def ratio_min(limit: float) -> Goal:
    return Goal("ratio_min", limit, f">= {limit:g}x")


def value_max(limit: float, unit: str) -> Goal:
    return Goal("value_max", limit, f"<= {limit:g} {unit}")


def value_eq(limit: float, unit: str) -> Goal:
    return Goal("value_eq", limit, f"= {limit:g} {unit}")


@dataclass
class RowResult:
    """One line of the table, with everything needed to render it again."""

    row_id: str  # "1a", "4b", ... (the table's order)
    group: str  # the --only name of the module that measured it
    title: str
    unit: str
    subject: Stats | None = None
    anchor: Stats | None = None
    ratio: float | None = None
    ratio_method: RatioMethod = "none"
    goal: Goal | None = None
    commands: list[str] = field(default_factory=list)
    anchor_commands: list[str] = field(default_factory=list)
    anchor_label: str = ""
    notes: str = ""
    status: RowStatus = "measured"

    @property
    def meets_goal(self) -> bool | None:
        if self.goal is None or self.status != "measured":
            return None
        return self.goal.met_by(self.subject, self.ratio)

    def to_json(self) -> dict[str, Any]:
        return {
            "row_id": self.row_id,
            "group": self.group,
            "title": self.title,
            "unit": self.unit,
            "subject": self.subject.to_json() if self.subject else None,
            "anchor": self.anchor.to_json() if self.anchor else None,
            "ratio": self.ratio,
            "ratio_method": self.ratio_method,
            "goal": self.goal.to_json() if self.goal else None,
            "meets_goal": self.meets_goal,
            "commands": self.commands,
            "anchor_commands": self.anchor_commands,
            "anchor_label": self.anchor_label,
            "notes": self.notes,
            "status": self.status,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RowResult:
        return cls(
            row_id=data["row_id"],
            group=data["group"],
            title=data["title"],
            unit=data["unit"],
            subject=Stats.from_json(data["subject"]) if data.get("subject") else None,
            anchor=Stats.from_json(data["anchor"]) if data.get("anchor") else None,
            ratio=data.get("ratio"),
            ratio_method=data.get("ratio_method", "none"),
            goal=Goal.from_json(data.get("goal")),
            commands=list(data.get("commands", [])),
            anchor_commands=list(data.get("anchor_commands", [])),
            anchor_label=data.get("anchor_label", ""),
            notes=data.get("notes", ""),
            status=data.get("status", "measured"),
        )


@dataclass(frozen=True)
class Paired:
    """Both sides of an alternated measurement and the median of their per-pair ratios."""

    subject: Stats
    anchor: Stats
    ratio: float


Measure = Callable[[], float]


def alternate(subject: Measure, anchor: Measure, runs: int, *, warmup: int = 1,
              warm_anchor_only: bool = False) -> Paired:
    """Run `runs` pairs, flipping which side goes first each pair; warm-up runs are discarded.

    Each callable performs one run and returns its figure (seconds, MB/s, bytes, ...).
    `warm_anchor_only` warms only the anchor, for subjects too expensive to run an extra time
    whose cold start the anchor's warm-up already pays (the page cache is shared).
    """
    for _ in range(warmup):
        anchor()
        if not warm_anchor_only:
            subject()
    subject_samples: list[float] = []
    anchor_samples: list[float] = []
    for index in range(runs):
        if index % 2 == 0:
            subject_samples.append(subject())
            anchor_samples.append(anchor())
        else:
            anchor_samples.append(anchor())
            subject_samples.append(subject())
    ratios = [s / a if a else math.inf for s, a in zip(subject_samples, anchor_samples, strict=True)]
    return Paired(Stats.of(subject_samples), Stats.of(anchor_samples), statistics.median(ratios))


def ratio_of_medians(subject: Stats, anchor: Stats) -> float:
    return subject.median / anchor.median if anchor.median else math.inf


def paired_row(base: RowResult, paired: Paired) -> RowResult:
    """`base` completed with an alternated measurement."""
    base.subject, base.anchor = paired.subject, paired.anchor
    base.ratio, base.ratio_method = paired.ratio, "pairs"
    return base


def failed_rows(rows: Sequence[RowResult], reason: str) -> list[RowResult]:
    """The planned rows of a group that could not be measured, kept visible with the reason."""
    for row in rows:
        row.status = "failed"
        row.notes = (row.notes + " " if row.notes else "") + f"Measurement failed: {reason}"
        row.subject = row.anchor = None
        row.ratio = None
    return list(rows)
