"""Tuning jobs on the local engine: real supervisors, real trial processes, the test trainer.

The trainer (trainers/hptrainer) reports a known function of its arguments through
cloudml-hypertune and records what it was given (argv, TF_CONFIG, environment, start and end
times) in its job directory, so each test checks what the trials really received and did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.local.backend import LocalBackend
from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._cli.main import root
from aiptrain._cli.summary import summarize_job
from aiptrain._job.spec import HyperparameterOutput, Job, JobState
from aiptrain._tuning.trials import objective_of
from tests.tuning.harness import (
    PROJECT,
    job_log,
    max_overlap,
    records,
    trials_of,
    tuning_job,
    wait_for_end,
    wait_until,
)
from tests.tuning.trainers.hptrainer.objective import objective

GRID_2_BY_3 = {
    "goal": "MAXIMIZE",
    "algorithm": "GRID_SEARCH",
    "maxTrials": 10,
    "maxParallelTrials": 2,
    "params": [
        {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["a", "b"]},
        {"parameterName": "y", "type": "INTEGER", "minValue": 1, "maxValue": 3},
    ],
}


def objective_value(trial: HyperparameterOutput) -> float:
    """The final objective of a trial that succeeded, which reports one."""
    value = objective_of(trial)
    assert value is not None, trial
    return value


def trials_by_id(job: Job) -> dict[str, HyperparameterOutput]:
    """A job's trials by id, which every reported trial has."""
    trials: dict[str, HyperparameterOutput] = {}
    for trial in trials_of(job):
        assert trial.trial_id is not None, trial
        trials[trial.trial_id] = trial
    return trials


def test_grid_runs_every_combination_once_with_the_services_arguments(
        engine: LocalJobEngine, package_uri: str, home: Path) -> None:
    engine.submit(PROJECT, tuning_job("grid", package_uri, GRID_2_BY_3, args=["--steps", "2"]))
    job = wait_for_end(engine, "grid")
    assert job.state == JobState.SUCCEEDED, job_log(engine, "grid")
    trials = trials_of(job)
    assert sorted(int(t.trial_id or 0) for t in trials) == [1, 2, 3, 4, 5, 6]
    order = {t.trial_id: t.hyperparameters for t in trials}
    # The grid's fixed order: the last parameter varies fastest; INTEGER values without `.0`.
    assert [order[str(n)] for n in range(1, 7)] == [
        {"kind": k, "y": y} for k in ("a", "b") for y in ("1", "2", "3")]

    seen = records(home, "grid")
    job_dir = "gs://out/grid"  # handed over as given, as on the service
    assert sorted(seen) == [str(n) for n in range(1, 7)]
    for trial_id, record in seen.items():
        given = order[trial_id] or {}
        assert record["argv"] == ["--steps", "2", f"--kind={given['kind']}", f"--y={given['y']}",
                                  "--job-dir", f"{job_dir}/{trial_id}"]
        assert record["tf_config"]["task"] == {"type": "chief", "index": 0, "trial": trial_id}
        assert record["trial"] == trial_id
        assert record["aip_model_dir"] == f"{job_dir}/{trial_id}/model/"
        assert record["metric_file"].endswith(f"/work/{trial_id}/hypertune.metrics")

    # Best first; the best is the true optimum of the grid (y=2, kind=b); values are the metric.
    assert trials[0].hyperparameters == {"kind": "b", "y": "2"}
    for trial in trials:
        assert trial.state == JobState.SUCCEEDED and trial.start_time and trial.end_time
        assert trial.hyperparameters is not None and trial.final_metric is not None
        assert trial.final_metric.training_step == 2
        expected = objective(0.0, int(trial.hyperparameters["y"]), trial.hyperparameters["kind"])
        assert objective_of(trial) == pytest.approx(expected)
    values = [objective_of(t) or 0.0 for t in trials]
    assert values == sorted(values, reverse=True)
    output = job.training_output
    assert output is not None and output.is_hyperparameter_tuning_job
    assert output.completed_trial_count == 6 and output.hyperparameter_metric_tag == "training/hptuning/metric"
    assert max_overlap([(r["start"], r["end"]) for r in seen.values()]) <= 2

    # The CLI: the trials table, and the trial column of the log.
    runner = CliRunner()
    summary = runner.invoke(root, ["jobs", "describe", "grid", "--summarize", "--project", PROJECT],
                            catch_exceptions=False)
    assert summary.exit_code == 0, summary.stderr
    lines = summary.stdout.splitlines()
    header = lines.index("trials (training/hptuning/metric, best first):")
    assert lines[header + 1].split() == ["TRIAL", "STATE", "OBJECTIVE", "STEP", "HYPERPARAMETERS"]
    best = lines[header + 2].split()
    assert best[:4] == [trials[0].trial_id, "SUCCEEDED", f"{values[0]:.6g}", "2"] and "kind=b," in best
    assert len(lines) == header + 2 + 6
    logs = runner.invoke(root, ["jobs", "stream-logs", "grid", "--project", PROJECT], catch_exceptions=False)
    assert logs.exit_code == 0
    columns = [line.split("\t") for line in logs.stdout.splitlines()]
    said = {(c[2], c[3]) for c in columns if len(c) == 5 and c[4].startswith("trial ")}
    assert said == {("master-replica-0", str(n)) for n in range(1, 7)}
    assert any(c[2] == "service" and c[3] == "" and c[4].startswith("Hyperparameter tuning:") for c in columns)


SEARCH_PARAMS = [
    {"parameterName": "x", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0},
    {"parameterName": "y", "type": "INTEGER", "minValue": 1, "maxValue": 5, "scaleType": "UNIT_REVERSE_LOG_SCALE"},
    {"parameterName": "lr", "type": "DOUBLE", "minValue": 1e-5, "maxValue": 0.1, "scaleType": "UNIT_LOG_SCALE"},
    {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["a", "b", "c"]},
]


def test_random_and_bayesian_searches_run_at_most_max_parallel_trials_at_once(
        engine: LocalJobEngine, package_uri: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "2")  # both jobs at once
    for job_id, algorithm, goal in (("random", "RANDOM_SEARCH", "MAXIMIZE"),
                                    ("bayes", "ALGORITHM_UNSPECIFIED", "MINIMIZE")):
        spec = {"goal": goal, "algorithm": algorithm, "maxTrials": 6, "maxParallelTrials": 2,
                "params": SEARCH_PARAMS}
        engine.submit(PROJECT, tuning_job(job_id, package_uri, spec, args=["--steps", "2", "--step-seconds", "0.4"]))
    for job_id, maximize in (("random", True), ("bayes", False)):
        job = wait_for_end(engine, job_id)
        assert job.state == JobState.SUCCEEDED, job_log(engine, job_id)
        trials = trials_of(job)
        assert len(trials) == 6 and all(t.state == JobState.SUCCEEDED for t in trials)
        values = [objective_value(t) for t in trials]
        assert values == sorted(values, reverse=maximize)
        for trial in trials:
            given = trial.hyperparameters or {}
            assert given["y"] in {"1", "2", "3", "4", "5"} and given["kind"] in {"a", "b", "c"}
            assert 1e-5 <= float(given["lr"]) <= 0.1
            expected = objective(float(given["x"]), int(given["y"]), given["kind"], float(given["lr"]))
            assert objective_of(trial) == pytest.approx(expected)
        seen = records(home, job_id)
        assert len(seen) == 6
        assert max_overlap([(r["start"], r["end"]) for r in seen.values()]) == 2


def test_too_many_failed_trials_fail_the_job_and_fewer_do_not(
        engine: LocalJobEngine, package_uri: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_MAX_RUNNING", "3")
    modes = {"parameterName": "mode", "type": "CATEGORICAL", "categoricalValues": ["fail-a", "fail-b", "ok"]}
    engine.submit(PROJECT, tuning_job("failing", package_uri, {
        "algorithm": "GRID_SEARCH", "maxTrials": 3, "maxFailedTrials": 2, "params": [modes]}))
    engine.submit(PROJECT, tuning_job("tolerated", package_uri, {
        "algorithm": "GRID_SEARCH", "maxTrials": 3, "maxParallelTrials": 3, "params": [
            {**modes, "categoricalValues": ["fail-a", "ok", "good-7"]}]}))
    # The engine checks the spec itself: jobs may come from any client of the emulator.
    engine.submit(PROJECT, tuning_job("invalid", package_uri, {"maxTrials": 2, "params": [{"parameterName": "x"}]}))

    failing = wait_for_end(engine, "failing")
    assert failing.state == JobState.FAILED
    message = failing.error_message or ""
    assert message.startswith("2 trials failed, so the tuning job failed (maxFailedTrials is 2).")
    assert "trial 1: The replica master 0 exited with a non-zero status of 3" in message
    assert "failing on purpose (fail-b)" in message
    # The third trial never started: the limit was reached first.
    assert [(t.trial_id, t.state) for t in trials_of(failing)] == [("1", JobState.FAILED), ("2", JobState.FAILED)]

    tolerated = wait_for_end(engine, "tolerated")
    assert tolerated.state == JobState.SUCCEEDED, job_log(engine, "tolerated")
    assert [(t.trial_id, t.state) for t in trials_of(tolerated)] == [
        ("3", JobState.SUCCEEDED), ("2", JobState.SUCCEEDED), ("1", JobState.FAILED)]
    assert tolerated.training_output is not None and tolerated.training_output.completed_trial_count == 2

    invalid = wait_for_end(engine, "invalid")
    assert invalid.state == JobState.FAILED
    assert (invalid.error_message or "").startswith("The hyperparameter spec is not valid: "
                                                    "trainingInput.hyperparameters.params[0].type: a parameter "
                                                    "type is required")


def test_a_trial_falling_behind_the_median_is_stopped_early(
        engine: LocalJobEngine, package_uri: str, home: Path) -> None:
    engine.submit(PROJECT, tuning_job("early", package_uri, {
        "goal": "MAXIMIZE", "algorithm": "GRID_SEARCH", "maxTrials": 4, "enableTrialEarlyStopping": True,
        "params": [{"parameterName": "mode", "type": "CATEGORICAL",
                    "categoricalValues": ["good-1", "good-2", "good-3", "stall"]}]}))
    job = wait_for_end(engine, "early")
    assert job.state == JobState.SUCCEEDED, job_log(engine, "early")
    trials = trials_of(job)
    assert [t.trial_id for t in trials] == ["3", "2", "1", "4"]
    stopped = trials[-1]
    assert stopped.hyperparameters == {"mode": "stall"}
    assert stopped.is_trial_stopped_early is True and stopped.state == JobState.SUCCEEDED
    assert stopped.final_metric is not None
    assert (stopped.final_metric.training_step, stopped.final_metric.objective_value) == (1, -100.0)
    assert all(t.is_trial_stopped_early is None for t in trials[:3])
    # The trial's replica set got SIGTERM (the trainer records it) long before its 120 s were up.
    record = records(home, "early")["4"]
    assert record["sigterm"] - record["start"] < 30
    summary = summarize_job(job).splitlines()
    assert summary[-1].split()[:4] == ["4", "SUCCEEDED", "(stopped", "early)"]
    log = job_log(engine, "early")
    assert "Stopping trial 4 early: its best training/hptuning/metric by step 1 is -100, worse than 2" in log
    assert "Stopping all replicas of trial 4." in log and "the job was cancelled" not in log


def test_resume_reuses_the_finished_trials_of_an_earlier_job(
        engine: LocalJobEngine, package_uri: str, home: Path) -> None:
    engine.submit(PROJECT, tuning_job("first", package_uri, {**GRID_2_BY_3, "maxTrials": 3}))
    first = wait_for_end(engine, "first")
    assert first.state == JobState.SUCCEEDED, job_log(engine, "first")
    engine.submit(PROJECT, tuning_job("second", package_uri, {
        **GRID_2_BY_3, "maxTrials": 5, "resumePreviousJobId": "first"}))
    engine.submit(PROJECT, tuning_job("orphan", package_uri, {**GRID_2_BY_3, "resumePreviousJobId": "nobody"}))
    second = wait_for_end(engine, "second")
    assert second.state == JobState.SUCCEEDED, job_log(engine, "second")
    trials = trials_by_id(second)
    old = trials_by_id(first)
    assert sorted(trials) == ["1", "2", "3", "4", "5"]
    for trial_id in ("1", "2", "3"):
        assert trials[trial_id] == old[trial_id]  # reported as the earlier job reported them
    # The grid goes on where the earlier job stopped: the reused combinations are not run again.
    assert trials["4"].hyperparameters == {"kind": "b", "y": "1"}
    assert trials["5"].hyperparameters == {"kind": "b", "y": "2"}
    assert sorted(records(home, "second")) == ["4", "5"]
    assert second.training_output is not None and second.training_output.completed_trial_count == 5
    assert trials_of(second)[0].trial_id == "5"  # best overall, across both jobs

    orphan = wait_for_end(engine, "orphan")
    assert orphan.state == JobState.FAILED
    assert "resumePreviousJobId 'nobody': there is no such job" in (orphan.error_message or "")

    # Through the local backend (the CLI's way in) the same mistakes are refused at submit.
    backend = LocalBackend(BackendSettings(project=PROJECT, home=home))
    path = "trainingInput.hyperparameters.resumePreviousJobId"
    refusals = {
        "nobody": "there is no such job in project",
        "second": None,  # a finished tuning job with the same metric and goal
        "third": "a job cannot resume itself",
        "plain": "not a hyperparameter tuning job",
    }
    engine.submit(PROJECT, Job.model_validate({"jobId": "plain", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "packageUris": [package_uri],
        "pythonModule": "hptrainer.task"}}))
    for previous, expected in refusals.items():
        job = tuning_job("third", package_uri, {**GRID_2_BY_3, "resumePreviousJobId": previous})
        mine = [p for p in backend.unsupported(job) if p.path == path]
        if expected is None:
            assert mine == []
        else:
            assert len(mine) == 1 and expected in mine[0].message and mine[0].hint, mine
    flipped = {**GRID_2_BY_3, "goal": "MINIMIZE" if GRID_2_BY_3["goal"] == "MAXIMIZE" else "MAXIMIZE"}
    [problem] = backend.unsupported(tuning_job("third", package_uri, {**flipped, "resumePreviousJobId": "second"}))
    assert problem.path == path and "their results do not compare" in problem.message


def test_cancel_stops_every_running_trial(engine: LocalJobEngine, package_uri: str, home: Path) -> None:
    engine.submit(PROJECT, tuning_job("cancelled", package_uri, {
        "maxTrials": 4, "maxParallelTrials": 2, "params": SEARCH_PARAMS}, args=["--mode", "stall"]))

    def two_running() -> bool:
        output = engine.get(PROJECT, "cancelled").training_output
        running = [t for t in (output.trials if output else None) or [] if t.state == JobState.RUNNING]
        return len(running) == 2 and len(records(home, "cancelled")) == 2

    wait_until(two_running, 60, "two trials to run")
    engine.cancel(PROJECT, "cancelled")
    job = wait_for_end(engine, "cancelled")
    assert job.state == JobState.CANCELLED
    assert [t.state for t in trials_of(job)] == [JobState.CANCELLED, JobState.CANCELLED]
    assert all("sigterm" in record for record in records(home, "cancelled").values())
