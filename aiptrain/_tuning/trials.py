"""Trials as `trainingOutput` reports them, and the order they are listed in.

`trainingOutput.trials` lists the best trial first, per the goal; trials without a final metric
(running, failed, or silent) come after every trial with one, in trial-number order.
`completedTrialCount` counts the trials that completed successfully (early-stopped ones too:
they end with the metric they had reached).
"""

from __future__ import annotations

from collections.abc import Iterable

from aiptrain._job.spec import HyperparameterOutput, JobState, TrainingOutput


def trial_number(trial: HyperparameterOutput) -> int:
    text = trial.trial_id or ""
    return int(text) if text.isdigit() else 0


def objective_of(trial: HyperparameterOutput) -> float | None:
    metric = trial.final_metric
    return None if metric is None else metric.objective_value


def best_first(trials: Iterable[HyperparameterOutput], *, maximize: bool) -> list[HyperparameterOutput]:
    def order(trial: HyperparameterOutput) -> tuple[int, float, int]:
        value = objective_of(trial)
        if value is None:
            return (1, 0.0, trial_number(trial))
        return (0, -value if maximize else value, trial_number(trial))

    return sorted(trials, key=order)


def tuning_output(trials: Iterable[HyperparameterOutput], *, metric_tag: str, maximize: bool,
                  previous: TrainingOutput | None = None) -> TrainingOutput:
    """The trainingOutput of a tuning job with these trials (keeping other service fields)."""
    ordered = best_first(trials, maximize=maximize)
    output = previous.model_copy() if previous is not None else TrainingOutput()
    output.is_hyperparameter_tuning_job = True
    output.hyperparameter_metric_tag = metric_tag
    output.completed_trial_count = sum(1 for trial in ordered if trial.state == JobState.SUCCEEDED)
    output.trials = ordered
    return output
