"""`enableTrialEarlyStopping`: the median stopping rule.

A running trial is stopped when its best value so far is worse than the median, over the trials
that already finished successfully, of each one's average value up to the same step (the rule
of Google Vizier, the service behind AI Platform tuning, also offered by Vertex AI as
`medianAutomatedStoppingSpec`). "The same step" is the running trial's latest reported step: a
finished trial takes part with the reports it made at or before that step, and only if it made
one. Nothing is stopped until at least `min_finished_trials` finished trials take part, so
early noise cannot stop a trial; "worse" is strict, so a trial level with the median runs on.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from aiptrain._tuning.metrics import MetricReport

MIN_FINISHED_TRIALS = 3


@dataclass(frozen=True)
class StopVerdict:
    step: int
    best: float  # the running trial's best value up to `step`
    median: float  # the median of the finished trials' averages up to `step`
    finished_trials: int  # how many finished trials the median is over

    def explain(self, tag: str) -> str:
        return (f"its best {tag} by step {self.step} is {self.best:.6g}, worse than {self.median:.6g}, the "
                f"median over {self.finished_trials} finished trials of their average {tag} up to that step")


@dataclass(frozen=True)
class MedianStoppingRule:
    maximize: bool
    min_finished_trials: int = MIN_FINISHED_TRIALS

    def check(self, running: Sequence[MetricReport],
              finished: Sequence[Sequence[MetricReport]]) -> StopVerdict | None:
        """A verdict to stop the running trial, or None to let it run on."""
        if not running:
            return None
        step = running[-1].step
        values = [report.value for report in running if report.step <= step]
        best = max(values) if self.maximize else min(values)
        averages = []
        for reports in finished:
            upto = [report.value for report in reports if report.step <= step]
            if upto:
                averages.append(statistics.fmean(upto))
        if len(averages) < self.min_finished_trials:
            return None
        median = statistics.median(averages)
        worse = best < median if self.maximize else best > median
        return StopVerdict(step, best, median, len(averages)) if worse else None
