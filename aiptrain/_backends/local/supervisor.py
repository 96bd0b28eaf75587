"""The detached process that runs one job: `python -m aiptrain._backends.local.supervisor --home H --job-key K`.

It outlives the command that submitted the job. Its life: wait QUEUED for a run slot (at most
AIPTRAIN_LOCAL_MAX_RUNNING jobs hold one) and the job's share of the machine (`machine_claim`:
its GPUs may be held by other jobs), PREPARING (the runtime's environment, built once, and
the packages installed on top), RUNNING (the job body runs one replica set, or a tuning engine
runs several), then record the final state.
It writes the terminal state before it exits, which is how `reaper` tells a crash from an end.

Cancellation arrives as SIGTERM and as a flag in the store (whichever is seen first).

A full disk fails the job instead of wedging it: when the log writer can no longer store lines
(or preparing the job meets ENOSPC) the job is stopped as a cancel would stop it and ends FAILED,
"no space left on ...", with the last lines that could not be stored. The supervisor holds a
small file (`space-reserve`) from its start and deletes it when the final state meets a full disk,
so that the job's end can be written; failing that, the write is retried for a while.

`job_body_for` picks the function that runs the job given a `JobContext`: one replica set, or
the tuning study of `tuning_job` for a job with `hyperparameters`, which calls
`JobContext.run_replica_set(extra_args=..., extra_env=..., trial_id=..., job_dir=..., stop=...)`
once per trial, from several threads.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from aiptrain._backends.local.job_context import JobBody, JobContext, run_single_training
from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._backends.local.layout import JobLayout, run_limit_line
from aiptrain._backends.local.log_writer import StoreLogWriter
from aiptrain._backends.local.machine_claim import MachineClaim, recorded_share, share_lines
from aiptrain._backends.local.reaper import reap_dead_jobs
from aiptrain._backends.local.store import JobRecord, JobStore, PendingLine
from aiptrain._backends.local.store_errors import is_out_of_space, note
from aiptrain._backends.local.subreaper import become_subreaper, kill_descendants
from aiptrain._environments.for_job import JobEnvironmentFailed, environment_for_job, job_day, ran_in
from aiptrain._environments.preparation import install_packages
from aiptrain._environments.resolution import python2_may_run_on_python3
from aiptrain._environments.stall import stall_limit
from aiptrain._environments.store import BuildCancelled
from aiptrain._gcs_endpoint.metadata import vm_identity
from aiptrain._gcs_endpoint.service import job_metadata_server, replica_storage, system_trust_problem
from aiptrain._job import era
from aiptrain._job.catalog import Catalog, load_catalog
from aiptrain._job.spec import JobState, TrainingInput
from aiptrain._paths import HomeLayout
from aiptrain._replicas.clock import utc_now
from aiptrain._replicas.cluster_plan import plan_cluster
from aiptrain._replicas.containers.cleanup import record_engine, remove_job_containers
from aiptrain._replicas.containers.container_engine import ContainerEngine, find_engine
from aiptrain._replicas.containers.images import runs_containers
from aiptrain._replicas.containers.settings import ContainerSettings
from aiptrain._replicas.log_capture import SERVICE_TASK
from aiptrain._replicas.processes import (
    kill_tokened_processes,
    process_start_ticks,
    run_token_of,
)
from aiptrain._replicas.replica_set import ReplicaSetOutcome
from aiptrain._replicas.scratch import JOB_TEMP_PREFIX, make_scratch, remove_directories, remove_scratch
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain.errors import AiptrainError

_SLOT_POLL_SECONDS = 0.25
_REAP_EVERY_SECONDS = 2.0
_CANCEL_POLL_SECONDS = 0.25
# How long the final state keeps being retried on a full disk (the reaper speaks after that).
_FINAL_STATE_RETRY_SECONDS = 120.0
# Room for the final state's transaction in the write-ahead log, held while the job runs.
_SPACE_RESERVE_BYTES = 256 * 1024


def job_body_for(record: JobRecord) -> JobBody:
    """How to run this job: one replica set, or a tuning study for jobs with `hyperparameters`."""
    training_input = record.job.training_input
    if training_input is not None and training_input.hyperparameters is not None:
        from aiptrain._tuning.tuning_run import run_tuning  # only tuning jobs pay for its imports

        return run_tuning
    return run_single_training


class Supervisor:
    def __init__(self, home: Path, key: int) -> None:
        self.home = home
        self.store = JobStore(home)
        self.record = self.store.get_by_key(key)
        self.key = key
        self.layout = JobLayout.of(home, self.record.project, self.record.job_id, key)
        self.stop = threading.Event()
        self.cancelled = False  # asked to stop by `jobs cancel` (not by a full disk)
        self._tmpdir: Path | None = None  # made on first use (`_job_tmpdir`)
        # A full disk stops the job (as a cancel would); `_finish` then says why it failed.
        self.sink = StoreLogWriter(self.store, key, on_failure=lambda _reason: self.stop.set())

    def say(self, message: str, severity: str = "INFO") -> None:
        self.sink.emit(SERVICE_TASK, severity, message)

    def move(
        self,
        state: JobState,
        line: str,
        *,
        severity: str = "INFO",
        allowed_from: frozenset[JobState] | None = None,
        error_message: str | None = None,
    ) -> bool:
        """Change state with its log line in one transaction, after every earlier line is stored."""
        self.sink.flush()
        pending = PendingLine(utc_now(), severity, SERVICE_TASK, line)
        changed = self.store.transition(
            self.key, state, allowed_from=allowed_from, error_message=error_message, lines=[pending]
        )
        return changed is not None

    def run(self) -> int:
        signal.signal(signal.SIGTERM, lambda _signum, _frame: self._cancel())
        become_subreaper()  # a trainer's setsid-ed, token-less child still ends up below us
        self._reserve_space()
        self.store.set_supervisor(self.key, os.getpid(), process_start_ticks(os.getpid()))
        watcher = threading.Thread(target=self._watch_for_cancel, name="cancel-watcher", daemon=True)
        watcher.start()
        try:
            self._lifecycle()
            return 0
        except Exception as error:
            detail = "".join(traceback.format_exception(error))
            note(detail)
            if is_out_of_space(error):  # the job's own store writes met the full disk
                self._finish(ReplicaSetOutcome(JobState.CANCELLED) if self.cancelled
                             else ReplicaSetOutcome(JobState.FAILED, f"no space left on {self.home}: {error}"))
                return 1
            for line in detail.rstrip().splitlines():
                self.say(line, "ERROR")
            self._finish(ReplicaSetOutcome(
                JobState.FAILED, f"Internal error in the local supervisor: {error!r} "
                f"(see {self.layout.supervisor_log})",
            ))
            return 1
        finally:
            self.sink.close()
            kill_tokened_processes(self.record.run_token)
            self._release_space()
            self._start_next()

    def _start_next(self) -> None:
        """This job's slot is free now: start the supervisors of the next queued jobs (`launch`)."""
        try:
            LocalJobEngine(self.home).store.close()  # its start-up dispatch does it
        except Exception as error:  # the next command dispatches as well
            note(f"starting the next queued jobs: {error!r}")

    def _cancel(self) -> None:
        self.cancelled = True
        self.stop.set()

    def _watch_for_cancel(self) -> None:
        while not self.stop.wait(_CANCEL_POLL_SECONDS):
            try:
                if self.store.cancel_requested(self.key):
                    self._cancel()
            except Exception as error:
                note(f"cancel watcher: {error!r}")

    def _lifecycle(self) -> None:
        try:
            settings = ReplicaSettings.from_env()
            era.check_setting(os.environ)  # a `local serve` that took the job over REST has not checked it
            stall_limit(os.environ)
            python2_may_run_on_python3(os.environ)
        except AiptrainError as error:
            self._finish(ReplicaSetOutcome(JobState.FAILED, f"{error.message} ({error.hint})"))
            return
        catalog = load_catalog()
        training_input = self.record.job.training_input or TrainingInput()
        claim = self._take_slot(settings, catalog, training_input)
        if claim is None:
            return
        if not self.move(JobState.PREPARING, "Job PREPARING.", allowed_from=frozenset({JobState.QUEUED})):
            self._finish(ReplicaSetOutcome(JobState.CANCELLED))
            return
        engine: ContainerEngine | None = None
        needs_system_trust = False
        # Asked once, here, and recorded with the job: every replica set of the job follows this
        # answer (`JobContext`), and `jobs describe` reads it.
        containers = runs_containers(training_input)
        self.store.set_runs_containers(self.key, containers)
        if containers:  # the image brings its runtime: nothing to build or install
            engine = self._container_engine()
            if engine is None:
                return
        else:
            prepared = self._prepare_runtime(training_input, catalog, settings)
            if prepared is None:
                return
            settings, needs_system_trust = prepared
        plan = plan_cluster(training_input, catalog, settings, lambda: claim.machine.gpus)
        for warning in plan.warnings:
            self.say(warning, "WARNING")
        share = recorded_share(self.store.get_by_key(self.key).machine_share)
        for line in share_lines(share, os.environ):
            self.say(line)
        if not self.move(JobState.RUNNING, "Job RUNNING.", allowed_from=frozenset({JobState.PREPARING})):
            self._finish(ReplicaSetOutcome(JobState.CANCELLED))
            return
        identity = vm_identity(self.record.project, self.record.job_id, training_input.region,
                               training_input.service_account, catalog)
        with job_metadata_server(identity, self.home, self.say, enabled=settings.metadata == "on") as metadata, \
                replica_storage(self.home, HomeLayout(self.home).storage, settings.gcs, self.say,
                                extend_system_trust=needs_system_trust,
                                metadata=metadata.server if metadata else None) as storage:
            context = JobContext(
                store=self.store,
                record=self.store.get_by_key(self.key),
                home=self.home,
                layout=self.layout,
                settings=settings,
                plan=plan,
                sink=self.sink,
                stop=self.stop,
                tmpdir=self._job_tmpdir(),
                storage=storage,
                metadata=metadata,
                share=share,
                engine=engine,
            )
            self._finish(job_body_for(context.record)(context))

    def _job_tmpdir(self) -> Path:
        """The job's own temporary directory (its installs' and its replicas' TMPDIR), removed at its end."""
        if self._tmpdir is None:
            self._tmpdir = make_scratch(JOB_TEMP_PREFIX, self.layout.scratch_record)
        return self._tmpdir

    def _prepare_runtime(
        self, training_input: TrainingInput, catalog: Catalog, settings: ReplicaSettings,
    ) -> tuple[ReplicaSettings, bool] | None:
        """PREPARING for a Python package: the runtime's environment, then the job's packages into
        its site; (the settings the replicas run with, whether they need the system's trust
        extended), or None when the job ended instead (recorded)."""
        record = self.store.get_by_key(self.key)
        try:
            environment, resolution = environment_for_job(
                training_input, catalog, home=self.home, settings=settings, say=self.say,
                stop=self.stop, run_token=record.run_token,
            )
        except BuildCancelled:
            self._finish(ReplicaSetOutcome(JobState.CANCELLED))
            return None
        except JobEnvironmentFailed as failed:
            self.say(failed.message, "ERROR")
            self._finish(ReplicaSetOutcome(JobState.FAILED, failed.message))
            return None
        day = job_day(resolution, self.record.job.labels, os.environ) if environment is not None else None
        self.store.set_runtime_environment(self.key, ran_in(resolution, environment, settings, day))
        needs_system_trust = environment is not None and not resolution.honours_ca_bundle
        if needs_system_trust and settings.gcs == "endpoint" and (why := system_trust_problem(self.home)):
            self.say(f"TensorFlow {resolution.tensorflow}'s gs:// client trusts only the system's certificates, and "
                     f"here they cannot be extended with the job's storage endpoint's ({why}): gs:// in --job-dir "
                     "and the trainer's arguments become local paths of the store (as with "
                     "AIPTRAIN_LOCAL_GCS=rewrite); gs:// paths built in the trainer's code do not work on this "
                     "runtime here.", "WARNING")
            settings = dataclasses.replace(settings, gcs="rewrite")
        if environment is not None:
            settings = dataclasses.replace(settings, python=environment.python)
        problem = install_packages(
            list(training_input.package_uris or []),
            site_dir=self.layout.site_dir,
            storage_root=HomeLayout(self.home).storage,
            python=settings.python,
            # pip's and uv's own leftovers of an install that is killed go with the job.
            base_env={**os.environ, "TMPDIR": str(self._job_tmpdir())},
            run_token=record.run_token,
            sink=self.sink,
            stop=self.stop,
            kill_grace=settings.kill_grace,
            environment=environment,
            day=day,
            # The trainer's pins may date the job later: `jobs describe` says the day it ran as of.
            on_day=lambda dated: self.store.set_runtime_environment(
                self.key, ran_in(resolution, environment, settings, dated)),
        )
        if self.stop.is_set():
            self._finish(ReplicaSetOutcome(JobState.CANCELLED))
            return None
        if problem is not None:
            self.say(problem, "ERROR")
            self._finish(ReplicaSetOutcome(JobState.FAILED, problem))
            return None
        return settings, needs_system_trust

    def _container_engine(self) -> ContainerEngine | None:
        """The container engine of a job whose replicas are containers, recorded in its files before it
        creates anything there (`cleanup`); None when there is none any more (the job FAILED)."""
        try:
            engine = find_engine(ContainerSettings.from_env())
        except AiptrainError as error:
            message = f"{error.message} ({error.hint})" if error.hint else error.message
            self.say(message, "ERROR")
            self._finish(ReplicaSetOutcome(JobState.FAILED, message))
            return None
        record_engine(self.layout.container_engine, engine)
        self.say(f"The replicas run as containers of {engine.name} {engine.version} ({engine.binary}).")
        return engine

    def _take_slot(
        self, settings: ReplicaSettings, catalog: Catalog, training_input: TrainingInput,
    ) -> MachineClaim | None:
        """Wait QUEUED for a run slot and the job's share of the machine; None when the job ended
        instead (cancelled while waiting, or asking for more GPUs than the machine has)."""
        groups = plan_cluster(training_input, catalog, settings, gpus=tuple).groups  # its warnings are said later
        claim = MachineClaim.for_job(training_input, groups, catalog, settings)
        refusal = claim.refusal()
        if refusal is not None:  # the machine lost GPUs since the job was submitted
            message = f"{refusal}: the job can never start here (ask for fewer GPUs, or use --backend vertex)."
            self.say(message, "ERROR")
            self._finish(ReplicaSetOutcome(JobState.FAILED, message))
            return None
        if not self._wait_for_slot(settings, claim):
            self._finish(ReplicaSetOutcome(JobState.CANCELLED))
            return None
        return claim

    def _wait_for_slot(self, settings: ReplicaSettings, claim: MachineClaim) -> bool:
        """True once this job holds a run slot and its share of the machine; False if it was
        cancelled while waiting."""
        announced = gpus_announced = False
        last_reap = 0.0
        sweeper: LocalJobEngine | None = None
        while not self.stop.is_set():
            claim.forget_wait()
            if self.store.try_acquire_slot(self.key, settings.max_running, claim):
                return True
            if claim.waiting is not None and not gpus_announced:
                self.say(claim.waiting_line())
                gpus_announced = True
            elif claim.waiting is None and not announced:
                self.say(f"Waiting for a free slot: {run_limit_line(self.store.max_running(settings.max_running))}")
                announced = True
            if time.monotonic() - last_reap > _REAP_EVERY_SECONDS:
                # A job whose submitter died before starting its supervisor is started, and a dead
                # supervisor must not hold a slot or a place in the queue forever.
                if sweeper is None:
                    sweeper = LocalJobEngine(self.home)  # its start-up sweep runs now
                else:
                    sweeper.recover_unlaunched()
                reap_dead_jobs(self.store, self.home)
                last_reap = time.monotonic()
            # Jitter keeps many waiting supervisors from polling in lockstep.
            self.stop.wait(_SLOT_POLL_SECONDS * (0.5 + random.random()))
        return False

    def _finish(self, outcome: ReplicaSetOutcome) -> None:
        # Whatever the replicas left behind goes before the job is reported as ended; a supervisor
        # this one started for a job found unlaunched (`launch`) carries its own token and is spared.
        mine = self.record.run_token
        kill_descendants(spare=lambda pid: (run_token_of(pid) or mine).split("/")[0] != mine)
        kill_tokened_processes(self.record.run_token)
        remove_job_containers(self.layout.container_engine, mine)  # each set removed its own; nothing else
        remove_scratch(self.layout.scratch_record)
        if self._tmpdir is not None:  # also when the job's files, and so the record, are gone
            remove_directories([str(self._tmpdir)])
        outcome = self._with_storage_failure(outcome)
        deadline = time.monotonic() + _FINAL_STATE_RETRY_SECONDS
        while True:
            try:
                self._record_end(outcome)
                return
            except Exception as error:
                if not is_out_of_space(error) or time.monotonic() > deadline:
                    raise
                if not self._release_space():
                    note(f"the final state {outcome.state.value} cannot be stored yet: {error}")
                    time.sleep(1.0)

    def _reserve_space(self) -> None:
        with contextlib.suppress(OSError):  # best effort: without it, the end is retried instead
            self.layout.root.mkdir(parents=True, exist_ok=True)
            with open(self.layout.space_reserve, "wb") as reserve:
                os.posix_fallocate(reserve.fileno(), 0, _SPACE_RESERVE_BYTES)

    def _release_space(self) -> bool:
        """Delete the reserve; True if there was one to free."""
        try:
            self.layout.space_reserve.unlink()
        except OSError:
            return False
        return True

    def _with_storage_failure(self, outcome: ReplicaSetOutcome) -> ReplicaSetOutcome:
        """A job stopped because its logs could not be stored has FAILED, whatever its replicas did."""
        failure = self.sink.failure
        if failure is None or (self.cancelled and outcome.state == JobState.CANCELLED):
            return outcome
        if outcome.failed_task is not None:  # a replica had failed of its own: its message says more
            return ReplicaSetOutcome(JobState.FAILED, f"{failure}. {outcome.error_message}")
        tail = "\n".join(self.sink.unstored)
        return ReplicaSetOutcome(JobState.FAILED, f"{failure}; the job was stopped. Its last lines:\n{tail}")

    def _record_end(self, outcome: ReplicaSetOutcome) -> None:
        state = outcome.state
        done = False
        if state == JobState.SUCCEEDED:
            done = self.move(state, "Job completed successfully.", allowed_from=frozenset({JobState.RUNNING}))
        elif state == JobState.FAILED:
            done = self.move(
                state,
                "Job failed.",
                severity="ERROR",
                allowed_from=frozenset({JobState.QUEUED, JobState.PREPARING, JobState.RUNNING}),
                error_message=outcome.error_message,
            )
        if not done:
            # Cancelled, or a cancel request arrived before the job could end another way.
            self.move(JobState.CANCELLED, "Job cancelled.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiptrain._backends.local.supervisor")
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--job-key", required=True, type=int)
    options = parser.parse_args(argv)
    return Supervisor(options.home, options.job_key).run()


if __name__ == "__main__":
    sys.exit(main())
