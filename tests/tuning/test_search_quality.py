"""The search loop in-process against the test trainer's own objective: no processes, fixed seeds.

The grid must find the true optimum of its grid; the Bayesian (TPE) search must beat random search
on average over a fixed set of seeds; trials of a resumed job must inform the search.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping
from typing import Any

from aiptrain._job.spec import HyperparameterSpec
from aiptrain._tuning.ask_tell import PastTrial, Search, SearchSettings
from aiptrain._tuning.plan import TuningPlan
from aiptrain._tuning.search import make_search
from tests.tuning.trainers.hptrainer.objective import objective

OPTIMUM = objective(0.3, 2, "b", 1e-3)
SEEDS = range(8)
BUDGET = 40

CONTINUOUS: list[dict[str, Any]] = [
    {"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1},
    {"parameterName": "y", "type": "INTEGER", "minValue": 0, "maxValue": 20},
    {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["a", "b", "c"]},
    {"parameterName": "lr", "type": "DOUBLE", "minValue": 1e-6, "maxValue": 1, "scaleType": "UNIT_LOG_SCALE"},
]


def plan_of(params: list[dict[str, Any]], algorithm: str, max_trials: int, goal: str = "MAXIMIZE") -> TuningPlan:
    return TuningPlan.from_spec(HyperparameterSpec.model_validate(
        {"params": params, "algorithm": algorithm, "maxTrials": max_trials, "goal": goal}))


def score(values: Mapping[str, Any]) -> float:
    """The objective at a suggestion's values, which are its parameters by name."""
    return objective(**values)


def evaluate(search: Search, trials: int, sign: float = 1.0) -> list[float]:
    """Run `trials` asks/tells against the objective; the values in the order tried."""
    values = []
    for _ in range(trials):
        suggestion = search.ask()
        if suggestion is None:
            break
        value = sign * score(suggestion.values)
        search.tell(suggestion, value)
        values.append(value)
    return values


def best_after(algorithm: str, seed: int, trials: int = BUDGET) -> float:
    search = make_search(SearchSettings.of(plan_of(CONTINUOUS, algorithm, trials), seed))
    return max(evaluate(search, trials))


def test_grid_search_finds_the_true_optimum_of_its_grid() -> None:
    params: list[dict[str, Any]] = [
        {"parameterName": "x", "type": "DISCRETE", "discreteValues": [0.1, 0.3, 0.5]},
        {"parameterName": "y", "type": "INTEGER", "minValue": 0, "maxValue": 4},
        {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["a", "b", "c"]},
        {"parameterName": "lr", "type": "DISCRETE", "discreteValues": [1e-4, 1e-3, 1e-2]},
    ]
    grid = list(itertools.product([0.1, 0.3, 0.5], range(5), ["a", "b", "c"], [1e-4, 1e-3, 1e-2]))
    true_best = max(objective(*point) for point in grid)
    assert true_best == OPTIMUM
    search = make_search(SearchSettings.of(plan_of(params, "GRID_SEARCH", 1000), seed=0))
    tried: list[tuple[dict[str, Any], float]] = []
    while (suggestion := search.ask()) is not None:
        tried.append((dict(suggestion.values), score(suggestion.values)))
    assert len(tried) == len(grid)
    best_values, best = max(tried, key=lambda item: item[1])
    assert best == OPTIMUM
    assert best_values == {"x": 0.3, "y": 2, "kind": "b", "lr": 0.001}


def test_bayesian_search_beats_random_search_on_average() -> None:
    random_best = [best_after("RANDOM_SEARCH", seed) for seed in SEEDS]
    bayes_best = [best_after("ALGORITHM_UNSPECIFIED", seed) for seed in SEEDS]
    random_mean, bayes_mean = statistics.fmean(random_best), statistics.fmean(bayes_best)
    print(f"best after {BUDGET} trials over seeds {list(SEEDS)} (optimum {OPTIMUM}): "
          f"random {random_mean:.3f} {[round(v, 3) for v in random_best]}, "
          f"bayesian {bayes_mean:.3f} {[round(v, 3) for v in bayes_best]}")
    assert bayes_mean > random_mean + 0.1
    assert sum(b > r for b, r in zip(bayes_best, random_best, strict=True)) >= 6
    assert bayes_mean > OPTIMUM - 0.2


def test_same_seed_same_suggestions() -> None:
    first = make_search(SearchSettings.of(plan_of(CONTINUOUS, "ALGORITHM_UNSPECIFIED", 20), seed=3))
    again = make_search(SearchSettings.of(plan_of(CONTINUOUS, "ALGORITHM_UNSPECIFIED", 20), seed=3))
    assert evaluate(first, 20) == evaluate(again, 20)


def test_parallel_asks_spread_out() -> None:
    search = make_search(SearchSettings.of(plan_of(CONTINUOUS, "ALGORITHM_UNSPECIFIED", 30), seed=5))
    evaluate(search, 12)
    pending = [search.ask() for _ in range(4)]
    assert all(p is not None for p in pending)
    assert len({tuple(sorted(p.values.items())) for p in pending if p is not None}) == 4


def test_a_resumed_jobs_trials_inform_the_bayesian_search() -> None:
    fresh_means, informed_means = [], []
    for seed in SEEDS:
        earlier = make_search(SearchSettings.of(plan_of(CONTINUOUS, "RANDOM_SEARCH", 30), seed=100 + seed))
        history = []
        for _ in range(30):
            suggestion = earlier.ask()
            assert suggestion is not None
            history.append(PastTrial(suggestion.values, score(suggestion.values)))
        the_plan = plan_of(CONTINUOUS, "ALGORITHM_UNSPECIFIED", 40)
        fresh = make_search(SearchSettings.of(the_plan, seed))
        informed = make_search(SearchSettings.of(the_plan, seed, history))
        fresh_means.append(statistics.fmean(evaluate(fresh, 10)))
        informed_means.append(statistics.fmean(evaluate(informed, 10)))
    # With 30 earlier results the model skips its random start and proposes better points at once.
    assert statistics.fmean(informed_means) > statistics.fmean(fresh_means) + 0.2
