"""A HyperparameterSpec with every default the service applied made explicit.

Defaults (reference section 7.4): goal GOAL_TYPE_UNSPECIFIED means MAXIMIZE; the metric tag is
`training/hptuning/metric` (cloudml-hypertune's default too); maxTrials and maxParallelTrials
are 1; the algorithm is the Bayesian one.

`maxFailedTrials` is "the number of failed trials that need to be seen before failing the job":
the job fails as soon as that many trials have failed. 0 (or unset) lets the service decide;
here that is `default_failed_trials_limit`: a quarter of maxTrials, but at least 3, so a trainer
that always crashes is noticed after a few trials while a flaky one is given room on a big budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiptrain._job.spec import Algorithm, Goal, HyperparameterSpec
from aiptrain._tuning.space import SearchSpace

DEFAULT_METRIC_TAG = "training/hptuning/metric"
MIN_FAILED_TRIALS_LIMIT = 3


def default_failed_trials_limit(max_trials: int) -> int:
    return max(MIN_FAILED_TRIALS_LIMIT, math.ceil(max_trials / 4))


def maximizes(goal: Goal | None) -> bool:
    return goal != Goal.MINIMIZE


@dataclass(frozen=True)
class TuningPlan:
    space: SearchSpace
    algorithm: Algorithm
    maximize: bool
    metric_tag: str
    max_trials: int
    max_parallel_trials: int
    failed_trials_limit: int  # the job fails once this many trials have failed
    early_stopping: bool
    resume_from: str | None
    best_measurement: bool = False  # a trial's final metric is its best report, not its last

    @classmethod
    def from_spec(cls, spec: HyperparameterSpec) -> TuningPlan:
        max_trials = spec.max_trials or 1
        return cls(
            space=SearchSpace.from_spec(spec),
            algorithm=spec.algorithm or Algorithm.ALGORITHM_UNSPECIFIED,
            maximize=maximizes(spec.goal),
            metric_tag=spec.hyperparameter_metric_tag or DEFAULT_METRIC_TAG,
            max_trials=max_trials,
            max_parallel_trials=spec.max_parallel_trials or 1,
            failed_trials_limit=spec.max_failed_trials or default_failed_trials_limit(max_trials),
            early_stopping=bool(spec.enable_trial_early_stopping),
            resume_from=spec.resume_previous_job_id or None,
            best_measurement=bool(spec.best_measurement),
        )

    @property
    def goal_name(self) -> str:
        return "MAXIMIZE" if self.maximize else "MINIMIZE"
