"""A tuning job's trials: the table (sortable in the page), the best marked, and the objective chart.

Everything comes from `trainingOutput.trials`, which the engine rewrites whenever a trial starts
or ends; the best is the first of `tuning.trials.best_first` (the goal's direction, ties to the
earlier trial), as `describe --summarize` ranks them. The chart shows the trials in the order they
ran, each trial's objective and the best value reached so far.
"""

from __future__ import annotations

from aiptrain._emulator.console.html import Html, join, tag
from aiptrain._emulator.console.svg_charts import TrialPoint, number, objective_chart
from aiptrain._job.spec import HyperparameterOutput, Job, ParameterType
from aiptrain._tuning.plan import DEFAULT_METRIC_TAG, maximizes
from aiptrain._tuning.trials import best_first, objective_of, trial_number


def render_trials(job: Job) -> Html | None:
    """The trials section of a tuning job; None for any other job."""
    training_input = job.training_input
    spec = training_input.hyperparameters if training_input is not None else None
    if spec is None:
        return None
    maximize = maximizes(spec.goal)
    metric = spec.hyperparameter_metric_tag or DEFAULT_METRIC_TAG
    trials = sorted((job.training_output.trials if job.training_output else None) or [], key=trial_number)
    ranked = best_first(trials, maximize=maximize)
    best = ranked[0].trial_id if ranked and objective_of(ranked[0]) is not None else None
    goal = f"{'maximize' if maximize else 'minimize'} {metric}"
    heading = tag("h2", "Trials ", tag("span", f"{len(trials)} of {spec.max_trials or 1}, {goal}", class_="hint"))
    if not trials:
        return join([heading, tag("p", "No trial has started yet.", class_="empty")])
    names = [p.parameter_name for p in spec.params or [] if p.parameter_name]
    names += sorted({key for trial in trials for key in trial.hyperparameters or {}} - set(names))
    numeric = {p.parameter_name for p in spec.params or [] if p.type not in (None, ParameterType.CATEGORICAL)}
    head = tag("tr", _sortable("Trial", "number"),
               *(_sortable(name, "number" if name in numeric else "text") for name in names),
               _sortable(metric, "number"), _sortable("Step", "number"), _sortable("State", "text"))
    rows = [_row(trial, names, best=trial.trial_id == best) for trial in trials]
    table = tag("table", tag("thead", head), tag("tbody", *rows), class_="trials sortable")
    points = [TrialPoint(trial.trial_id or "", objective_of(trial), trial.trial_id == best) for trial in trials]
    chart = objective_chart(points, maximize=maximize, metric=metric)
    return join([heading, tag("div", chart, class_="chart-box"), table])


def _sortable(name: str, kind: str) -> Html:
    return tag("th", tag("button", name, type="button", class_="sort", data_sort=kind))


def _row(trial: HyperparameterOutput, names: list[str], *, best: bool) -> Html:
    values = trial.hyperparameters or {}
    objective = objective_of(trial)
    step = trial.final_metric.training_step if trial.final_metric else None
    state = trial.state.value if trial.state else ""
    shown_state = f"{state} (stopped early)" if trial.is_trial_stopped_early else state
    marker = tag("span", "★ best", class_="best-mark", title="the best trial") if best else Html("")
    return tag("tr",
               tag("td", trial.trial_id or "", " ", marker, data_value=str(trial_number(trial))),
               *(tag("td", values.get(name, ""), data_value=values.get(name, "")) for name in names),
               tag("td", "" if objective is None else number(objective),
                   data_value="" if objective is None else repr(objective)),
               tag("td", "" if step is None else str(step), data_value="" if step is None else str(step)),
               tag("td", shown_state, data_value=shown_state),
               class_="best" if best else None, data_trial=trial.trial_id or "")
