"""The pure parts of tuning: the space, its scales, the grid, metric files, the stopping rule, ordering."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from aiptrain._job.spec import FinalMetric, HyperparameterOutput, HyperparameterSpec, JobState
from aiptrain._tuning.ask_tell import PastTrial, SearchSettings
from aiptrain._tuning.early_stopping import MedianStoppingRule
from aiptrain._tuning.grid import GridSearch
from aiptrain._tuning.metrics import MetricFile, MetricReport
from aiptrain._tuning.plan import DEFAULT_METRIC_TAG, TuningPlan, default_failed_trials_limit
from aiptrain._tuning.search import make_search
from aiptrain._tuning.space import (
    DiscreteParameter,
    DoubleParameter,
    IntegerParameter,
    ParameterValue,
    Scale,
    SearchSpace,
    format_value,
    from_coordinate,
    parse_value,
    to_coordinate,
)
from aiptrain._tuning.trials import best_first, tuning_output

REPO = Path(__file__).resolve().parents[2]


def spec(*params: dict[str, Any], **fields: Any) -> HyperparameterSpec:
    return HyperparameterSpec.model_validate({"params": list(params), **fields})


def plan(*params: dict[str, Any], **fields: Any) -> TuningPlan:
    return TuningPlan.from_spec(spec(*params, **fields))


INTEGER_Y = {"parameterName": "y", "type": "INTEGER", "minValue": 1, "maxValue": 3}
KIND = {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["a", "b"]}


# -- values as arguments ----------------------------------------------------------------------


def test_values_are_written_the_way_argparse_reads_them() -> None:
    space = SearchSpace.from_spec(spec(
        {"parameterName": "hidden-units", "type": "INTEGER", "minValue": 16, "maxValue": 128},
        {"parameterName": "batch-size", "type": "DISCRETE", "discreteValues": [16, 32, 64]},
        {"parameterName": "dropout", "type": "DISCRETE", "discreteValues": [0.1, 0.25, 0.5]},
        {"parameterName": "learning-rate", "type": "DOUBLE", "minValue": 1e-5, "maxValue": 0.1,
         "scaleType": "UNIT_LOG_SCALE"},
        {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
    ))
    values: dict[str, ParameterValue] = {"hidden-units": 64, "batch-size": 32.0, "dropout": 0.25,
                                         "learning-rate": 1e-05, "optimizer": "sgd"}
    assert space.arguments(values) == ["--hidden-units=64", "--batch-size=32", "--dropout=0.25",
                                       "--learning-rate=1e-05", "--optimizer=sgd"]
    # What trainingOutput reports reads back to the same values.
    assert space.parse(space.as_text(values)) == values
    with pytest.raises(ValueError):
        space.parse({**space.as_text(values), "batch-size": "48"})
    with pytest.raises(ValueError):
        space.parse({**space.as_text(values), "hidden-units": "12.5"})


def test_format_and_parse_edge_cases() -> None:
    double = DoubleParameter("lr", 0.0, 2.0)
    assert format_value(double, 1.0) == "1.0"  # a DOUBLE keeps its point: the flag is a float
    assert parse_value(double, "0.5") == 0.5
    with pytest.raises(ValueError):
        parse_value(double, "3")
    assert format_value(IntegerParameter("n", 1, 9), 7.0) == "7"
    assert format_value(DiscreteParameter("d", (1e-06, 2.0)), 1e-06) == "1e-06"


# -- scales -----------------------------------------------------------------------------------


def test_reverse_log_reflects_the_range() -> None:
    momentum = DoubleParameter("momentum", 0.01, 0.99, Scale.REVERSE_LOG)
    assert to_coordinate(momentum, 0.9) == pytest.approx(0.1)
    assert from_coordinate(momentum, 0.1) == pytest.approx(0.9)
    assert from_coordinate(momentum, 0.01) == pytest.approx(0.99)
    units = IntegerParameter("units", 1, 100, Scale.REVERSE_LOG)
    assert to_coordinate(units, 90) == 11
    assert from_coordinate(units, 11) == 90
    # DISCRETE values are searched by position; CATEGORICAL ones as they are.
    batch = DiscreteParameter("batch", (16.0, 32.0, 64.0))
    assert to_coordinate(batch, 64.0) == 2
    assert from_coordinate(batch, 1) == 32.0


@pytest.mark.parametrize(("scale", "dense_near_top"), [("UNIT_LOG_SCALE", False),
                                                         ("UNIT_REVERSE_LOG_SCALE", True),
                                                         ("UNIT_LINEAR_SCALE", None)])
def test_random_search_samples_each_scale_with_its_density(scale: str, dense_near_top: bool | None) -> None:
    the_plan = plan({"parameterName": "v", "type": "DOUBLE", "minValue": 0.01, "maxValue": 1.0, "scaleType": scale},
                    {"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 1000, "scaleType": scale},
                    algorithm="RANDOM_SEARCH", maxTrials=300)
    search = make_search(SearchSettings.of(the_plan, seed=7))
    doubles: list[float] = []
    integers: list[int] = []
    for _ in range(300):
        suggestion = search.ask()
        assert suggestion is not None
        doubles.append(cast(float, suggestion.values["v"]))  # a DOUBLE's value
        integers.append(cast(int, suggestion.values["n"]))  # an INTEGER's value, checked below
        search.tell(suggestion, 0.0)
    assert all(0.01 <= v <= 1.0 for v in doubles)
    assert all(isinstance(n, int) and 1 <= n <= 1000 for n in integers)
    upper = sum(v > 0.505 for v in doubles) / len(doubles)
    upper_int = sum(n > 500 for n in integers) / len(integers)
    if dense_near_top is None:
        assert 0.4 < upper < 0.6 and 0.4 < upper_int < 0.6
    elif dense_near_top:
        # 1 - log-uniform: P(value above the middle) = log(0.505 / 0.01) / log(100) = 0.85
        assert upper > 0.75 and upper_int > 0.75
    else:
        assert upper < 0.25 and upper_int < 0.25


# -- grid -------------------------------------------------------------------------------------


def test_grid_order_is_fixed_and_capped_by_max_trials() -> None:
    search = GridSearch(plan(INTEGER_Y, KIND).space)
    seen = []
    while (suggestion := search.ask()) is not None:
        seen.append(dict(suggestion.values))
    assert seen == [{"y": 1, "kind": "a"}, {"y": 1, "kind": "b"}, {"y": 2, "kind": "a"},
                    {"y": 2, "kind": "b"}, {"y": 3, "kind": "a"}, {"y": 3, "kind": "b"}]
    capped = make_search(SearchSettings.of(plan(INTEGER_Y, KIND, algorithm="GRID_SEARCH", maxTrials=4), seed=1))
    assert isinstance(capped, GridSearch)


def test_grid_skips_what_a_resumed_job_tried_and_walks_huge_grids_lazily() -> None:
    space = plan(INTEGER_Y, KIND).space
    history = [PastTrial({"y": 1, "kind": "a"}, 0.5), PastTrial({"y": 2, "kind": "b"}, None)]
    search = GridSearch(space, history)
    rest = []
    while (suggestion := search.ask()) is not None:
        rest.append(space.key(suggestion.values))
    assert rest == [("1", "b"), ("2", "a"), ("3", "a"), ("3", "b")]
    huge = GridSearch(plan({"parameterName": "n", "type": "INTEGER", "minValue": 0, "maxValue": 10**12},
                           {"parameterName": "m", "type": "INTEGER", "minValue": 0, "maxValue": 10**12}).space)
    assert huge.size == (10**12 + 1) ** 2
    first = huge.ask()
    assert first is not None and dict(first.values) == {"n": 0, "m": 0}


# -- plan defaults ----------------------------------------------------------------------------


def test_plan_defaults() -> None:
    defaults = plan(INTEGER_Y)
    assert defaults.maximize and defaults.metric_tag == DEFAULT_METRIC_TAG == "training/hptuning/metric"
    assert (defaults.max_trials, defaults.max_parallel_trials, defaults.failed_trials_limit) == (1, 1, 3)
    assert not plan(INTEGER_Y, goal="MINIMIZE").maximize
    assert plan(INTEGER_Y, goal="GOAL_TYPE_UNSPECIFIED").maximize
    assert plan(INTEGER_Y, maxFailedTrials=0, maxTrials=40).failed_trials_limit == 10
    assert plan(INTEGER_Y, maxFailedTrials=2, maxTrials=40).failed_trials_limit == 2
    assert [default_failed_trials_limit(n) for n in (1, 12, 13, 100)] == [3, 3, 4, 25]


# -- trials as reported -----------------------------------------------------------------------


def trial(trial_id: str, value: float | None, state: JobState = JobState.SUCCEEDED) -> HyperparameterOutput:
    metric = None if value is None else FinalMetric(training_step=10, objective_value=value)
    return HyperparameterOutput(trial_id=trial_id, final_metric=metric, state=state)


def test_trials_are_listed_best_first_and_those_without_a_metric_last() -> None:
    trials = [trial("1", 0.5), trial("2", None, JobState.FAILED), trial("3", 0.9), trial("4", None, JobState.RUNNING),
              trial("10", 0.7)]
    assert [t.trial_id for t in best_first(trials, maximize=True)] == ["3", "10", "1", "2", "4"]
    assert [t.trial_id for t in best_first(trials, maximize=False)] == ["1", "10", "3", "2", "4"]
    output = tuning_output(trials, metric_tag="loss", maximize=False)
    assert output.is_hyperparameter_tuning_job and output.completed_trial_count == 3
    assert output.to_api()["completedTrialCount"] == "3"


# -- metric files, as cloudml-hypertune writes them ---------------------------------------------


def test_metric_file_reads_what_hypertune_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hypertune

    path = tmp_path / "trial" / "metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(path))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "3")
    reporter = hypertune.HyperTune()
    metrics = MetricFile(path, "accuracy")
    assert metrics.read() == [] and metrics.final is None
    reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="accuracy", metric_value=0.5,
                                                 global_step=10)
    reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="loss", metric_value=2.0, global_step=10)
    record = json.loads(path.read_text().splitlines()[0])
    assert record["accuracy"] == "0.5" and record["global_step"] == "10" and record["trial"] == "3"
    assert [(r.step, r.value) for r in metrics.read()] == [(10, 0.5)]
    # The library keeps the last 100 reports in the file; reading as they come loses none.
    for step in range(11, 261):
        reporter.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="accuracy", metric_value=step / 1000,
                                                     global_step=step)
        if step % 50 == 0:
            metrics.read()
    metrics.read()
    assert [r.step for r in metrics.reports] == list(range(10, 261))
    # The cast: mypy keeps `metrics.final` narrowed to None by the first assertion, though read() changed it.
    assert cast(MetricReport | None, metrics.final) == MetricReport(260, 0.26, metrics.reports[-1].timestamp)
    # A half-written line is left for the next read.
    path.write_text(path.read_text() + '{"accuracy": "0.9", "global_st')
    assert metrics.read() == []


# -- the median stopping rule -----------------------------------------------------------------


def reports(*pairs: tuple[int, float]) -> list[MetricReport]:
    return [MetricReport(step, value, 0.0) for step, value in pairs]


def test_median_rule_stops_a_trial_behind_the_finished_ones_at_the_same_step() -> None:
    rule = MedianStoppingRule(maximize=True)
    finished = [reports((1, 0.5), (2, 0.7), (3, 0.9)), reports((1, 0.4), (2, 0.6)), reports((1, 0.6), (3, 0.8))]
    # At step 1 the finished averages are 0.5, 0.4, 0.6: median 0.5.
    verdict = rule.check(reports((1, 0.3)), finished)
    assert verdict is not None and (verdict.step, verdict.best, verdict.median, verdict.finished_trials) == (
        1, 0.3, 0.5, 3)
    assert "median over 3 finished trials" in verdict.explain("accuracy")
    assert rule.check(reports((1, 0.5)), finished) is None  # level with the median runs on
    # Up to step 2 the averages are 0.6, 0.5, 0.6 (median 0.6); the trial's best so far counts.
    assert rule.check(reports((1, 0.65), (2, 0.55)), finished) is None
    assert rule.check(reports((1, 0.2), (2, 0.55)), finished) is not None
    # Too few finished trials with a report that early: no verdict.
    assert rule.check(reports((1, 0.0)), finished[:2]) is None
    assert rule.check(reports((0, 0.0)), finished) is None
    assert rule.check([], finished) is None
    minimizing = MedianStoppingRule(maximize=False)
    assert minimizing.check(reports((1, 0.3)), finished) is None
    assert minimizing.check(reports((1, 0.9)), finished) is not None


# -- the template's per-trial directory -------------------------------------------------------


@pytest.fixture
def template_task(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    saved = [name for name in sys.modules if name == "trainer" or name.startswith("trainer.")]
    for name in saved:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(REPO / "trainer_template"))
    try:
        yield importlib.import_module("trainer.task")
    finally:
        for name in [name for name in sys.modules if name == "trainer" or name.startswith("trainer.")]:
            del sys.modules[name]


def test_template_writes_each_trial_once_under_its_own_directory(template_task: ModuleType) -> None:
    from trainer.cluster import SINGLE, ClusterRole

    trial = ClusterRole(mode=SINGLE, trial="3")
    # aiptrain: --job-dir is already the trial's directory, and AIP_MODEL_DIR lies under it.
    assert template_task.model_dir_for("/out/job/3", trial, {"AIP_MODEL_DIR": "/out/job/3/model/"}) == "/out/job/3"
    # Vertex AI: every trial gets the job's --job-dir, but its own AIP_MODEL_DIR.
    assert template_task.model_dir_for("gs://b/job", trial, {"AIP_MODEL_DIR": "gs://b/job/3/model/"}) == "gs://b/job/3"
    # ml v1: the same --job-dir for every trial and no AIP_MODEL_DIR: the trial is appended.
    assert template_task.model_dir_for("gs://b/job", trial, {}) == "gs://b/job/3"
