"""RANDOM_SEARCH and the default algorithm (Bayesian on the service), on Optuna's samplers.

The default algorithm is Optuna's TPE sampler (a Tree-structured Parzen Estimator: it models
where good and bad results lie and proposes points where good ones are likelier), driven through
Optuna's ask/tell interface with an in-memory study. RANDOM_SEARCH uses Optuna's random sampler
over the same distributions, so both read the space the same way (`space`'s sampler
coordinates): DOUBLE and INTEGER as floats and integers with Optuna's log flag for the log and
reverse-log scales, DISCRETE as the position in its list, CATEGORICAL as a choice.

TPE starts with random trials before it has a model: `startup_trials(maxTrials)`, a fifth of the
budget between 2 and 10 (Optuna's default is 10, which would leave small jobs purely random).
While trials run in parallel, TPE pretends the running ones scored badly (Optuna's "constant
liar"), so parallel asks spread out instead of proposing the same point. Both samplers are
seeded, so a job's suggestions are reproducible given the same results.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from aiptrain._job.spec import Algorithm
from aiptrain._tuning.ask_tell import SearchSettings, Suggestion
from aiptrain._tuning.space import (
    CategoricalParameter,
    DiscreteParameter,
    DoubleParameter,
    IntegerParameter,
    Parameter,
    from_coordinate,
    to_coordinate,
)

if TYPE_CHECKING:
    import optuna

MAX_STARTUP_TRIALS = 10
MIN_STARTUP_TRIALS = 2


def startup_trials(max_trials: int) -> int:
    return min(MAX_STARTUP_TRIALS, max(MIN_STARTUP_TRIALS, max_trials // 5))


def _distribution(parameter: Parameter) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(parameter, DoubleParameter):
        return FloatDistribution(parameter.low, parameter.high, log=parameter.scale.is_logarithmic)
    if isinstance(parameter, IntegerParameter):
        return IntDistribution(parameter.low, parameter.high, log=parameter.scale.is_logarithmic)
    if isinstance(parameter, DiscreteParameter):
        return IntDistribution(0, len(parameter.values) - 1)
    assert isinstance(parameter, CategoricalParameter)
    return CategoricalDistribution(list(parameter.values))


def _sampler(settings: SearchSettings) -> optuna.samplers.BaseSampler:
    import optuna

    if settings.algorithm == Algorithm.RANDOM_SEARCH:
        return optuna.samplers.RandomSampler(seed=settings.seed)
    return optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=startup_trials(settings.max_trials))


class ModelBasedSearch:
    def __init__(self, settings: SearchSettings) -> None:
        import optuna

        # Optuna logs every trial at INFO; the job's log already says what happened.
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._parameters = settings.space.parameters
        self._distributions = {p.name: _distribution(p) for p in self._parameters}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self._study = optuna.create_study(
                direction="maximize" if settings.maximize else "minimize", sampler=_sampler(settings)
            )
        for past in settings.history:
            if past.objective is None:
                continue
            self._study.add_trial(optuna.trial.create_trial(
                params={p.name: to_coordinate(p, past.values[p.name]) for p in self._parameters},
                distributions=self._distributions,
                value=past.objective,
            ))

    def ask(self) -> Suggestion:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature notices from the sampler
            trial = self._study.ask(self._distributions)
        values = {p.name: from_coordinate(p, trial.params[p.name]) for p in self._parameters}
        return Suggestion(values, handle=trial.number)

    def tell(self, suggestion: Suggestion, objective: float | None) -> None:
        from optuna.trial import TrialState

        if objective is None:
            self._study.tell(suggestion.handle, state=TrialState.FAIL)
        else:
            self._study.tell(suggestion.handle, objective)
