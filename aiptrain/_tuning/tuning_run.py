"""The body of a hyperparameter tuning job on the local engine: trials as replica sets.

`run_tuning(context)` is what `supervisor.job_body_for` picks for a job with `hyperparameters`.
The study needs only a `TuningHost` (the local engine's `JobContext` is one; the Ray backend's
driver has its own, placing each trial on the cluster), so every backend runs the same study.
It asks the search (`aiptrain.tuning`) for combinations and runs each as a trial: one full
replica set, started from its own thread, at most `maxParallelTrials` at once. A trial gets

- `--NAME=VALUE` for every parameter, after the job's own arguments (then `--job-dir`);
- TF_CONFIG `task.trial` and CLOUD_ML_TRIAL_ID set to its number ("1", "2", ...);
- `--job-dir JOB_DIR/TRIAL` (and AIP_MODEL_DIR etc. under it), so trials never share outputs;
- CLOUD_ML_HP_METRIC_FILE naming its own file, which cloudml-hypertune writes and this module
  reads while the trial runs (early stopping) and after it ends (the final metric).

`trainingOutput` is rewritten whenever a trial starts or ends. The job succeeds when at least one
trial succeeded and fewer than the failed-trials limit failed; it fails as soon as that limit is
reached (running trials are stopped); a cancel stops every running trial.
"""

from __future__ import annotations

import queue
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import FinalMetric, HyperparameterOutput, HyperparameterSpec, Job, JobState, TrainingInput
from aiptrain._job.validate import check_hyperparameters
from aiptrain._replicas.clock import job_time
from aiptrain._replicas.replica_set import ReplicaSetOutcome
from aiptrain._tuning.ask_tell import PastTrial, Search, SearchSettings, Suggestion, seed_for
from aiptrain._tuning.early_stopping import MedianStoppingRule
from aiptrain._tuning.metrics import (
    METRIC_FILE_VARIABLE,
    MetricFile,
    MetricReport,
    SummaryReadError,
)
from aiptrain._tuning.plan import TuningPlan
from aiptrain._tuning.search import make_search
from aiptrain._tuning.trials import objective_of, tuning_output
from aiptrain.errors import NotFound, Problem

_POLL_SECONDS = 0.25


class TuningHost(Protocol):
    """What the study needs from the backend that runs its trials."""

    stop: threading.Event  # set when the job is cancelled

    @property
    def training_input(self) -> TrainingInput: ...

    @property
    def project(self) -> str: ...

    @property
    def job_id(self) -> str: ...

    def say(self, message: str, severity: str = "INFO", trial_id: str | None = None) -> None: ...

    def trials_at_once(self, max_parallel_trials: int) -> tuple[int, str | None]:
        """How many trials run side by side, and a WARNING line if fewer than asked."""

    def metric_path(self, trial_id: str) -> Path:
        """Where the study reads the trial's cloudml-hypertune reports (the host keeps it current)."""

    def run_replica_set(self, *, extra_args: Sequence[str] = (), extra_env: Mapping[str, str] | None = None,
                        trial_id: str | None = None, job_dir: str | None = None,
                        stop: threading.Event | None = None) -> ReplicaSetOutcome:
        """One trial's cluster, from start to end (see `JobContext.run_replica_set`)."""

    def summary_metric(self, job_dir: str, tag: str) -> MetricReport | None:
        """The last value of `tag` in the summary events under the trial's `job_dir`; SummaryReadError."""

    def update_job(self, mutate: Callable[[Job], None]) -> None:
        """Apply `mutate` to the job resource that describe shows (trainingOutput)."""

    def find_job(self, job_id: str) -> Job:
        """Another job of the project, for resumePreviousJobId; NotFound if there is none."""


class _CannotTune(Exception):
    """The job cannot start tuning (an unusable resumePreviousJobId); the job fails."""


class _CannotResume(_CannotTune):
    def __init__(self, previous_id: str | None, reason: str) -> None:
        super().__init__(f"resumePreviousJobId {previous_id!r}: {reason}")
        self.reason = reason


@dataclass
class _Trial:
    trial_id: str
    suggestion: Suggestion
    hyperparameters: dict[str, str]
    metrics: MetricFile
    # None: the final metric is the last report; True / False: the best one, maximizing or not.
    best_maximizing: bool | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    start_time: str = field(default_factory=job_time)
    end_time: str | None = None
    state: JobState = JobState.RUNNING
    stopped_early: bool = False
    failure: str | None = None
    thread: threading.Thread | None = None

    # The last value of the tag in its summary events, when it reported nothing through hypertune.
    summary_metric: MetricReport | None = None

    @property
    def final(self) -> MetricReport | None:
        if self.state != JobState.SUCCEEDED:
            return None
        reports = self.metrics.reports
        if self.best_maximizing is not None and reports:
            pick = max if self.best_maximizing else min
            return pick(reports, key=lambda report: report.value)
        return self.metrics.final or self.summary_metric

    def output(self) -> HyperparameterOutput:
        final = self.final
        return HyperparameterOutput(
            trial_id=self.trial_id,
            hyperparameters=dict(self.hyperparameters),
            final_metric=None if final is None else FinalMetric(training_step=final.step,
                                                                objective_value=final.value),
            start_time=self.start_time,
            end_time=self.end_time,
            state=self.state,
            is_trial_stopped_early=True if self.stopped_early else None,
        )


def _failure_summary(message: str | None) -> str:
    """`The replica X exited ... <its last error line>`: the first line of a set's errorMessage."""
    if not message:
        return "failed"
    return message.splitlines()[0].strip()


class TuningRun:
    def __init__(self, context: TuningHost, spec: HyperparameterSpec) -> None:
        self.context = context
        self.spec = spec
        self.plan = TuningPlan.from_spec(spec)
        self.resumed: list[HyperparameterOutput] = []
        self.trials: dict[str, _Trial] = {}
        self.finished: queue.Queue[tuple[str, ReplicaSetOutcome]] = queue.Queue()
        self.next_number = 1
        self.exhausted = False
        self.cancelling = False
        self.failing = False
        self.rule = MedianStoppingRule(self.plan.maximize) if self.plan.early_stopping else None

    # -- helpers ------------------------------------------------------------------------------

    def say(self, message: str, severity: str = "INFO", trial_id: str | None = None) -> None:
        self.context.say(message, severity, trial_id=trial_id)

    @property
    def running(self) -> list[_Trial]:
        return [trial for trial in self.trials.values() if trial.state == JobState.RUNNING]

    def count(self, state: JobState) -> int:
        return sum(1 for trial in self.trials.values() if trial.state == state) + sum(
            1 for trial in self.resumed if trial.state == state)

    def publish(self) -> None:
        outputs = [*self.resumed, *(trial.output() for trial in self.trials.values())]

        def mutate(job: Job) -> None:
            job.training_output = tuning_output(outputs, metric_tag=self.plan.metric_tag,
                                                maximize=self.plan.maximize, previous=job.training_output)

        self.context.update_job(mutate)

    # -- the study ----------------------------------------------------------------------------

    def run(self) -> ReplicaSetOutcome:
        try:
            self.resumed = self.resumed_trials()
        except _CannotTune as error:
            self.say(str(error), "ERROR")
            return ReplicaSetOutcome(JobState.FAILED, str(error))
        history = [PastTrial(self.plan.space.parse(trial.hyperparameters or {}), objective_of(trial))
                   for trial in self.resumed]
        search = make_search(SearchSettings.of(self.plan, seed_for(self.context.project, self.context.job_id),
                                               history))
        parallel, warning = self.context.trials_at_once(self.plan.max_parallel_trials)
        if warning:
            self.say(warning, "WARNING")
        self.say(
            f"Hyperparameter tuning: up to {self.plan.max_trials} trials, {parallel} at a time, "
            f"{self.plan.algorithm.value}, {self.plan.goal_name} {self.plan.metric_tag}"
            + (f", {len(self.resumed)} reused from job {self.plan.resume_from}" if self.plan.resume_from else "")
            + ("; trials falling behind the median are stopped early" if self.rule else "") + "."
        )
        self.publish()
        try:
            self.study(search, parallel)
        finally:
            for trial in self.running:
                trial.stop.set()
            for trial in self.trials.values():
                if trial.thread is not None:
                    trial.thread.join()
        return self.outcome()

    def study(self, search: Search, parallel: int) -> None:
        while True:
            if self.context.stop.is_set() and not self.cancelling:
                self.cancelling = True
                self.stop_running("the job was cancelled")
            self.collect(search, wait=bool(self.running))
            self.watch_metrics()
            if not (self.cancelling or self.failing) and self.count(JobState.FAILED) >= self.plan.failed_trials_limit:
                self.failing = True
                self.stop_running(f"{self.count(JobState.FAILED)} trials failed")
            if not (self.cancelling or self.failing):
                self.start_trials(search, parallel)
            if not self.running and (self.cancelling or self.failing or not self.can_start_more()):
                return

    def can_start_more(self) -> bool:
        return not self.exhausted and len(self.resumed) + len(self.trials) < self.plan.max_trials

    def start_trials(self, search: Search, parallel: int) -> None:
        while len(self.running) < parallel and self.can_start_more():
            suggestion = search.ask()
            if suggestion is None:
                self.exhausted = True
                self.say("Every combination of the grid has been tried.")
                return
            self.start(suggestion)

    def start(self, suggestion: Suggestion) -> None:
        trial_id = str(self.next_number)
        self.next_number += 1
        metric_path = self.context.metric_path(trial_id)
        metric_path.parent.mkdir(parents=True, exist_ok=True)
        metric_path.unlink(missing_ok=True)
        trial = _Trial(trial_id, suggestion, self.plan.space.as_text(suggestion.values),
                       MetricFile(metric_path, self.plan.metric_tag),
                       best_maximizing=self.plan.maximize if self.plan.best_measurement else None)
        self.trials[trial_id] = trial
        arguments = self.plan.space.arguments(suggestion.values)
        self.say(f"Trial {trial_id} starting: {' '.join(arguments)}", trial_id=trial_id)
        job_dir = self.context.training_input.job_dir
        trial.thread = threading.Thread(
            target=self.run_trial,
            args=(trial, arguments, f"{job_dir.rstrip('/')}/{trial_id}" if job_dir else None),
            name=f"trial-{trial_id}",
        )
        trial.thread.start()
        self.publish()

    def run_trial(self, trial: _Trial, arguments: list[str], job_dir: str | None) -> None:
        outcome = ReplicaSetOutcome(JobState.FAILED, "The trial ended without an outcome.")
        try:
            outcome = self.context.run_replica_set(
                extra_args=arguments,
                extra_env={METRIC_FILE_VARIABLE: str(trial.metrics.path)},
                trial_id=trial.trial_id,
                job_dir=job_dir,
                stop=trial.stop,
            )
            if outcome.state == JobState.SUCCEEDED:
                self.read_summaries(trial, job_dir)
        except Exception as error:  # the study must hear of every trial's end
            outcome = ReplicaSetOutcome(JobState.FAILED, f"The trial could not run: {error!r}")
        finally:
            self.finished.put((trial.trial_id, outcome))

    def read_summaries(self, trial: _Trial, job_dir: str | None) -> None:
        """Without a cloudml-hypertune report, the last value of the tag in the trial's summaries."""
        trial.metrics.read()
        if trial.metrics.final is not None or not job_dir:
            return
        tag = self.plan.metric_tag
        try:
            trial.summary_metric = self.context.summary_metric(job_dir, tag)
        except SummaryReadError as error:
            self.say(f"Trial {trial.trial_id}: {error}", "WARNING", trial_id=trial.trial_id)
            return
        if trial.summary_metric is not None:
            self.say(f"Trial {trial.trial_id} reported no {tag} through cloudml-hypertune; using the last "
                     f"value in its summary events under {job_dir}.", trial_id=trial.trial_id)

    def stop_running(self, reason: str) -> None:
        running = self.running
        if running:
            names = ", ".join(trial.trial_id for trial in running)
            self.say(f"Stopping running trial(s) {names}: {reason}.")
        for trial in running:
            trial.stop.set()

    # -- results ------------------------------------------------------------------------------

    def collect(self, search: Search, *, wait: bool) -> None:
        try:
            ended = [self.finished.get(timeout=_POLL_SECONDS) if wait else self.finished.get_nowait()]
        except queue.Empty:
            return
        while True:
            try:
                ended.append(self.finished.get_nowait())
            except queue.Empty:
                break
        for trial_id, outcome in ended:
            self.end(self.trials[trial_id], outcome, search)
        self.publish()

    def end(self, trial: _Trial, outcome: ReplicaSetOutcome, search: Search) -> None:
        if trial.thread is not None:
            trial.thread.join()
        trial.metrics.read()
        trial.end_time = job_time()
        if outcome.state == JobState.SUCCEEDED:
            # Finished on its own, even if a stop was on its way: not stopped early.
            trial.stopped_early = False
        if trial.stopped_early or outcome.state == JobState.SUCCEEDED:
            trial.state = JobState.SUCCEEDED
        elif outcome.state == JobState.CANCELLED:
            trial.state = JobState.CANCELLED
        else:
            trial.state = JobState.FAILED
            trial.failure = _failure_summary(outcome.error_message)
        final = trial.final
        search.tell(trial.suggestion, None if final is None else final.value)
        tid = trial.trial_id
        if trial.state == JobState.FAILED:
            self.say(f"Trial {tid} failed: {trial.failure}", "ERROR", trial_id=tid)
        elif trial.state == JobState.CANCELLED:
            self.say(f"Trial {tid} cancelled.", trial_id=tid)
        elif final is None:
            self.say(f"Trial {tid} succeeded but reported no {self.plan.metric_tag} (report it with "
                     "cloudml-hypertune, or write it with tf.summary under the trial's --job-dir); "
                     "it cannot be ranked.", "WARNING", trial_id=tid)
        else:
            how = "stopped early" if trial.stopped_early else "succeeded"
            self.say(f"Trial {tid} {how}: {self.plan.metric_tag}={final.value:.6g} at step {final.step}.",
                     trial_id=tid)

    def watch_metrics(self) -> None:
        for trial in self.running:
            if not trial.metrics.read() or self.rule is None or trial.stopped_early or trial.stop.is_set():
                continue
            verdict = self.rule.check(trial.metrics.reports, self.finished_reports())
            if verdict is not None:
                trial.stopped_early = True
                self.say(f"Stopping trial {trial.trial_id} early: {verdict.explain(self.plan.metric_tag)}.",
                         trial_id=trial.trial_id)
                trial.stop.set()

    def finished_reports(self) -> list[list[MetricReport]]:
        """The reports of the trials that ran to a successful end, for the median stopping rule."""
        reports = [trial.metrics.reports for trial in self.trials.values()
                   if trial.state == JobState.SUCCEEDED and not trial.stopped_early]
        for old in self.resumed:
            metric = old.final_metric
            if old.is_trial_stopped_early or metric is None or metric.objective_value is None:
                continue
            reports.append([MetricReport(metric.training_step or 0, metric.objective_value, 0.0)])
        return [r for r in reports if r]

    def outcome(self) -> ReplicaSetOutcome:
        if self.cancelling:
            return ReplicaSetOutcome(JobState.CANCELLED)
        failed = [trial for trial in self.trials.values() if trial.state == JobState.FAILED]
        details = "; ".join(f"trial {trial.trial_id}: {trial.failure}" for trial in failed)
        if self.failing:
            how = (f"maxFailedTrials is {self.spec.max_failed_trials}" if self.spec.max_failed_trials
                   else f"maxFailedTrials is unset: the limit is {self.plan.failed_trials_limit}")
            message = f"{len(failed)} trials failed, so the tuning job failed ({how}). {details}"
            self.say(message, "ERROR")
            return ReplicaSetOutcome(JobState.FAILED, message)
        if self.count(JobState.SUCCEEDED) == 0:
            message = "No trial succeeded." + (f" {details}" if details else "")
            self.say(message, "ERROR")
            return ReplicaSetOutcome(JobState.FAILED, message)
        self.say(self.summary())
        return ReplicaSetOutcome(JobState.SUCCEEDED)

    def summary(self) -> str:
        outputs = [*self.resumed, *(trial.output() for trial in self.trials.values())]
        ranked = tuning_output(outputs, metric_tag=self.plan.metric_tag, maximize=self.plan.maximize).trials or []
        values = [v for v in (objective_of(t) for t in ranked) if v is not None]
        text = f"Tuning finished: {len(outputs)} trials, {self.count(JobState.SUCCEEDED)} succeeded"
        if values:
            best = ranked[0]
            settings = ", ".join(f"{k}={v}" for k, v in (best.hyperparameters or {}).items())
            text += (f"; best trial {best.trial_id} ({self.plan.metric_tag}={values[0]:.6g}, {settings})"
                     f", median {statistics.median(values):.6g}")
        return text + "."

    # -- resumePreviousJobId --------------------------------------------------------------------

    def resumed_trials(self) -> list[HyperparameterOutput]:
        """The earlier job's successful trials that fit this job's space (and the next trial number)."""
        previous_id = self.plan.resume_from
        if not previous_id:
            return []
        previous = _previous_tuning_job(self.context.find_job, self.context.project, self.context.job_id,
                                        self.plan)
        state = previous.state or JobState.QUEUED
        if not state.is_terminal:
            raise _CannotResume(previous_id, f"that job is still {state.value}; wait for it to end "
                                "(or cancel it) before resuming it")
        old_trials = (previous.training_output.trials if previous.training_output else None) or []
        numbers = [int(t.trial_id) for t in old_trials if t.trial_id is not None and t.trial_id.isdigit()]
        self.next_number = max(numbers, default=0) + 1
        reused = []
        for trial in old_trials:
            if trial.state != JobState.SUCCEEDED:
                continue
            try:
                self.plan.space.parse(trial.hyperparameters or {})
            except ValueError as error:
                self.say(f"Not reusing trial {trial.trial_id} of job {previous_id}: {error} in this job's "
                         "parameters.", "WARNING")
                continue
            reused.append(trial.model_copy(deep=True))
        return reused[: self.plan.max_trials]


def _previous_tuning_job(find_job: Callable[[str], Job], project: str, job_id: str | None, plan: TuningPlan) -> Job:
    """The job `plan.resume_from` names, if its trials can seed this job's study."""
    previous_id = plan.resume_from
    if previous_id == job_id:
        raise _CannotResume(previous_id, "a job cannot resume itself")
    try:
        previous = find_job(previous_id or "")
    except NotFound:
        raise _CannotResume(previous_id, f"there is no such job in project {project}") from None
    old_input = previous.training_input
    old_spec = old_input.hyperparameters if old_input is not None else None
    if old_spec is None:
        raise _CannotResume(previous_id, "that job is not a hyperparameter tuning job")
    old_plan = TuningPlan.from_spec(old_spec)
    if (old_plan.metric_tag, old_plan.maximize) != (plan.metric_tag, plan.maximize):
        raise _CannotResume(previous_id, f"that job tuned {old_plan.goal_name} {old_plan.metric_tag}, this "
                            f"one {plan.goal_name} {plan.metric_tag}; their results do not compare")
    return previous


def resume_problems(find_job: Callable[[str], Job], project: str, job: Job) -> list[Problem]:
    """Why the job's resumePreviousJobId cannot be honoured, checked at submit (empty when it can).

    `find_job` reads a job of the project as the backend keeps it (NotFound when there is none).

    Whether the earlier job has ended is left to the run: it may well end while this one queues.
    """
    spec = job.training_input.hyperparameters if job.training_input is not None else None
    if spec is None or not spec.resume_previous_job_id:
        return []
    try:
        _previous_tuning_job(find_job, project, job.job_id,
                             TuningPlan.from_spec(spec))
    except _CannotResume as error:
        return [Problem("trainingInput.hyperparameters.resumePreviousJobId", error.reason,
                        "name a finished tuning job of this project with the same metric and goal "
                        "(`aiptrain jobs list` shows them), or leave resumePreviousJobId out")]
    except ValueError:
        return []  # a spec that does not validate is reported by the spec checks
    return []


def run_tuning(context: TuningHost) -> ReplicaSetOutcome:
    """The job body of a tuning job; a spec that does not validate fails the job before any trial."""
    spec = context.training_input.hyperparameters
    problems = check_hyperparameters(spec, load_catalog())
    if spec is None or problems:
        message = "The hyperparameter spec is not valid: " + "; ".join(problem.render() for problem in problems)
        context.say(message, "ERROR")
        return ReplicaSetOutcome(JobState.FAILED, message)
    return TuningRun(context, spec).run()
