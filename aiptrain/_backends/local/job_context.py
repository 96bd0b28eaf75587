"""What a job body gets from the supervisor: the job, where things go, and a way to run replica sets.

A job body (one replica set, or the tuning study of `tuning_job`) takes a `JobContext` and calls
`run_replica_set(extra_args=..., extra_env=..., trial_id=..., job_dir=..., stop=...)` once per
run, from several threads if it likes. The supervisor builds the context and picks the body.
The context is the local engine's `tuning_job.TuningHost`: the rest of its methods serve the study.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aiptrain._backends.local.layout import JobLayout, path_list_entry
from aiptrain._backends.local.log_writer import StoreLogWriter
from aiptrain._backends.local.store import JobRecord, JobStore
from aiptrain._backends.local.store_errors import is_out_of_space, note
from aiptrain._gcs_endpoint.service import host_endpoints, replica_base_environment
from aiptrain._job.spec import Job, JobState, TrainingInput
from aiptrain._job.tf_config import replica_tasks
from aiptrain._paths import HomeLayout
from aiptrain._replicas.cluster_plan import LocalPlan, trials_at_once
from aiptrain._replicas.command import ProcessCommand, ReplicaCommand, for_every_replica
from aiptrain._replicas.containers.container_engine import ContainerEngine
from aiptrain._replicas.containers.endpoints import HostEndpoint
from aiptrain._replicas.containers.settings import ContainerSettings
from aiptrain._replicas.gs_paths import local_location, localize
from aiptrain._replicas.log_capture import SERVICE_TASK
from aiptrain._replicas.machine_share import JobShare, ReplicaShare
from aiptrain._replicas.processes import ManagedProcess
from aiptrain._replicas.replica_set import ReplicaPolicy, ReplicaSetOutcome, ReplicaSetSpec, run_replica_set
from aiptrain._replicas.settings import ReplicaSettings

if TYPE_CHECKING:
    from aiptrain._gcs_endpoint.service import JobMetadata, ReplicaStorage
    from aiptrain._replicas.containers.launcher import ReplicaContainer
    from aiptrain._tuning.metrics import MetricReport


def stored_job(store: JobStore, project: str, job_id: str) -> Job:
    """A job of the store as describe shows it (its state from the store's row); NotFound."""
    record = store.get(project, job_id)
    job = record.job.model_copy()
    job.state = record.state
    return job


class _StoreObserver:
    """Records each replica start and exit in the store (pids for the reaper, exit codes)."""

    def __init__(self, store: JobStore, key: int, trial_id: str | None) -> None:
        self._store = store
        self._key = key
        self._trial_id = trial_id

    def started(self, task_name: str, process: ManagedProcess, restarts: int) -> None:
        with _unless_out_of_space():
            self._store.replica_started(
                self._key, self._trial_id, task_name, process.pid, process.pgid, process.start_ticks, restarts
            )

    def exited(self, task_name: str, returncode: int) -> None:
        with _unless_out_of_space():
            self._store.replica_exited(self._key, self._trial_id, task_name, returncode)


@contextlib.contextmanager
def _unless_out_of_space() -> Iterator[None]:
    """A replica's record is bookkeeping: on a full disk it is skipped, and the job carries on to the
    end the log writer or the user gives it, instead of dying in the middle of stopping its replicas."""
    try:
        yield
    except Exception as error:
        if not is_out_of_space(error):
            raise
        note(f"a replica's start or exit could not be recorded: {error}")


@dataclass
class JobContext:
    """What a job body gets: the job, where things go, and a way to run replica sets."""

    store: JobStore
    record: JobRecord
    home: Path
    layout: JobLayout
    settings: ReplicaSettings
    plan: LocalPlan
    sink: StoreLogWriter
    stop: threading.Event
    # The job's own temporary directory (`scratch`): its replicas' TMPDIR, removed at its end.
    tmpdir: Path
    # The replicas' gs:// endpoint; None when gs:// is rewritten to local paths (AIPTRAIN_LOCAL_GCS=rewrite).
    storage: ReplicaStorage | None = None
    # The VM's metadata server (credentials, project, zone); containers reach it through their relays.
    metadata: JobMetadata | None = None
    # The job's part of the machine: one set of replica shares per cluster running at once (a
    # tuning job's trials take a free set each); None runs replicas on the whole machine.
    share: JobShare | None = None
    # The container engine of a job whose replicas are containers, found at PREPARING.
    engine: ContainerEngine | None = None

    def __post_init__(self) -> None:
        self._container_notes_said = False
        self.container_settings = ContainerSettings.from_env()
        self._free_lanes: queue.SimpleQueue[int] = queue.SimpleQueue()
        for lane in range(len(self.share.lanes) if self.share is not None else 0):
            self._free_lanes.put(lane)

    @property
    def runs_containers(self) -> bool:
        """Whether the replicas are containers: the one answer PREPARING recorded with the job
        (`Supervisor`), which every replica set follows."""
        return bool(self.record.runs_containers)

    @property
    def storage_root(self) -> Path:
        return HomeLayout(self.home).storage

    @property
    def training_input(self) -> TrainingInput:
        return self.record.job.training_input or TrainingInput()

    def say(self, message: str, severity: str = "INFO", trial_id: str | None = None) -> None:
        self.sink.emit(SERVICE_TASK, severity, message, trial_id=trial_id)

    @property
    def project(self) -> str:
        return self.record.project

    @property
    def job_id(self) -> str:
        return self.record.job_id

    def trials_at_once(self, max_parallel_trials: int) -> tuple[int, str | None]:
        if self.share is None:
            return trials_at_once(max_parallel_trials, self.plan.groups)
        per_trial = sum(len(share.gpus) for share in self.share.lanes[0])
        return trials_at_once(max_parallel_trials, self.plan.groups, per_trial, self.share.machine_gpus)

    def metric_path(self, trial_id: str) -> Path:
        return self.layout.work_dir / trial_id / "hypertune.metrics"

    def summary_metric(self, job_dir: str, tag: str) -> MetricReport | None:
        from aiptrain._tuning.metrics import read_summary_metric

        return read_summary_metric(self.settings.python, self.output_location(job_dir), tag, self.replica_base_env())

    def update_job(self, mutate: Callable[[Job], None]) -> None:
        self.store.update_resource(self.record.key, mutate)

    def find_job(self, job_id: str) -> Job:
        return stored_job(self.store, self.record.project, job_id)

    def replica_base_env(self) -> dict[str, str]:
        """The environment every replica starts from (TF_CONFIG and the rest come on top)."""
        base_env = replica_base_environment(os.environ, self.storage, self.metadata)
        base_env["PYTHONPATH"] = str(path_list_entry(self.layout.site_dir))
        base_env["TMPDIR"] = str(self.tmpdir)
        return base_env

    def output_location(self, uri: str) -> str:
        """Where a replica (or a reader in its environment) finds `uri`: itself, or its local path."""
        return uri if self.storage is not None else local_location(uri, self.storage_root)

    def run_replica_set(
        self,
        *,
        extra_args: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        trial_id: str | None = None,
        job_dir: str | None = None,
        stop: threading.Event | None = None,
    ) -> ReplicaSetOutcome:
        """Run the job's cluster once: the job's args plus `extra_args`, then `--job-dir`.

        `job_dir` (gs:// or local) defaults to the job's jobDir; tuning passes JOB_DIR/TRIAL_ID.
        `stop` ends this set alone (a tuning trial stopped early); it defaults to the job's
        `stop`, and whoever passes another must also set it when the job's is set.
        Blocks until every process of the set is gone. Thread-safe.
        """
        training_input = self.training_input
        containers = self.runs_containers
        # A container's command is made from the job's args and the trial's flags apart (containerArgs).
        args = [*(training_input.args or [])] if containers else [*(training_input.args or []), *extra_args]
        local_dir = job_dir if job_dir is not None else training_input.job_dir
        if self.storage is None:  # AIPTRAIN_LOCAL_GCS=rewrite; else the trainer gets them as given
            local = localize(args, local_dir, self.storage_root)
            for note in local.notes:
                self.say(note, trial_id=trial_id)
            args, local_dir = local.args, local.job_dir
            if local_dir:
                Path(local_dir).mkdir(parents=True, exist_ok=True)
        policy = ReplicaPolicy(
            max_restarts=self.settings.max_restarts,
            restart_delay=self.settings.restart_delay,
            kill_grace=self.settings.kill_grace,
            evaluator_grace=self.settings.evaluator_grace,
        )
        observer = _StoreObserver(self.store, self.record.key, trial_id)
        lane = self._free_lanes.get() if self.share is not None else None  # never waits: a study runs no
        # more trials at once than there are lanes
        try:
            shares = ({share.task_name: share for share in self.share.lanes[lane]}
                      if self.share is not None and lane is not None else None)
            commands, replicas = self.replica_commands(args, local_dir, extra_args, shares)
            spec = ReplicaSetSpec(
                job=self.record.job,
                groups=self.plan.groups,
                commands=commands,
                job_dir=local_dir,
                work_dir=self.layout.work_dir / trial_id if trial_id else self.layout.work_dir,
                run_token=f"{self.record.run_token}/{trial_id or 'run'}",
                base_env={} if containers else self.replica_base_env(),
                extra_env=dict(extra_env or {}),
                trial_id=trial_id,
                # A Vertex AI job the emulator took in: its numeric ID in CLOUD_ML_JOB_ID.
                visible_job_id=self.record.vertex_job_id,
                vertex_wording=self.record.vertex_job_id is not None,
                shares=shares,
            )
            if containers:
                return self._run_containers(spec, replicas, policy, observer, stop)
            return run_replica_set(spec, policy, self.sink, stop if stop is not None else self.stop, observer)
        finally:
            if lane is not None:
                self._free_lanes.put(lane)

    def replica_commands(
        self, args: Sequence[str], job_dir: str | None, extra_args: Sequence[str],
        shares: Mapping[str, ReplicaShare] | None,
    ) -> tuple[dict[str, ReplicaCommand], list[ReplicaContainer]]:
        """(task name -> what the replica runs, the containers of a container job): the trainer
        module with `args` (which then hold a trial's flags), or each replica's container, its
        command from the job's `args` and then a trial's `extra_args`, its limits from its share."""
        # A Vertex AI job the emulator took in gets its directories through AIP_* only.
        job_dir_argument = self.record.vertex_job_id is None
        if not self.runs_containers:
            command = ProcessCommand(self.settings.python, self.training_input.python_module or "", tuple(args),
                                     job_dir, job_dir_argument)
            return for_every_replica(self.plan.groups, command), []
        from aiptrain._job.catalog import load_catalog
        from aiptrain._replicas.containers.replica_containers import replica_containers

        replicas = replica_containers(self.training_input, self.plan.groups, load_catalog(), args=args,
                                      job_dir=job_dir, job_dir_argument=job_dir_argument, extra_args=extra_args,
                                      shares=shares)
        return {replica.task_name: replica.command for replica in replicas}, replicas

    def container_endpoints(self) -> list[HostEndpoint]:
        """The job's host-side servers its containers reach (its metadata server, its storage endpoint)."""
        return host_endpoints(self.storage, self.metadata)

    def _run_containers(self, spec: ReplicaSetSpec, replicas: list[ReplicaContainer], policy: ReplicaPolicy,
                        observer: _StoreObserver, stop: threading.Event | None) -> ReplicaSetOutcome:
        """The set as containers (`replicas.containers`): its network and owners made first, removed
        with its containers at the end, whatever the end."""
        assert self.engine is not None  # found at PREPARING, when the job was found to run containers
        from aiptrain._replicas.containers.launcher import ContainerLauncher, ContainerSetupFailed

        mounts = {} if self.storage is not None else {str(self.storage_root): f"{self.storage_root}:rw"}
        launcher = ContainerLauncher(
            self.engine, replicas, job_token=self.record.run_token, run_token=spec.run_token,
            endpoints=self.container_endpoints(), mounts=mounts, pull=self.container_settings.pulls,
            say=lambda line: self.say(line, trial_id=spec.trial_id),
            trust_cache=HomeLayout(self.home).container_trust_cache, scratch_record=self.layout.scratch_record)
        try:
            launcher.open()
        except ContainerSetupFailed as failed:
            message = f"The containers of this job could not be set up: {failed.message}"
            self.say(message, "ERROR", trial_id=spec.trial_id)
            return ReplicaSetOutcome(JobState.FAILED, message)
        try:
            if not self._container_notes_said:
                self._container_notes_said = True
                for line in launcher.notes():
                    self.say(line, trial_id=spec.trial_id)
                with _unless_out_of_space():
                    self.store.set_runtime_environment(self.record.key, {"notes": launcher.notes()})
            tasks = [(task.task_type, task.task_name) for task in replica_tasks(spec.groups)]
            spec = dataclasses.replace(spec, launcher=launcher, share_gpus=False, addresses=launcher.addresses(tasks))
            return run_replica_set(spec, policy, self.sink, stop if stop is not None else self.stop, observer)
        finally:
            launcher.close()


JobBody = Callable[[JobContext], ReplicaSetOutcome]


def run_single_training(context: JobContext) -> ReplicaSetOutcome:
    return context.run_replica_set()
