"""Running one replica set: every replica of a cluster, from start to the primary's exit.

This is the unit both a training job and (later) each hyperparameter-tuning trial run:
`run_replica_set` takes the cluster, each replica's command, extra env and an optional trial id,
and returns how it ended. Several sets may run at once in different threads of one process.

Completion follows the service: the primary's exit decides. When it ends, workers and parameter
servers are stopped (SIGTERM to their process groups, SIGKILL after a grace period); after a
success, evaluators first get a bounded grace to finish their last evaluation. A worker,
parameter server or evaluator that fails while the primary runs is restarted with the same
TF_CONFIG and port, up to `max_restarts` times; after that the set fails, naming it. Restarts back
off (`restart_delay`, doubling each time, at most `_MAX_RESTART_DELAY_SECONDS`), so a replica that
crashes at start-up does not burn every restart within a second, and one that lost a peer gives it
time to come back.

Restarts are for what the service restarted after: a process that was killed (a signal, or a
status of 128 + N from a shell), as after a VM restart. A replica that exits with an ordinary
non-zero status (the user's code raised: an import error, a bad flag, a crash before the first
step) ends the set at once, as on the service; restarting code that fails the same way every
time only delays the verdict. The errorMessage then names the replica that failed first, in the
service's words ("The replica master 0 exited with a non-zero status of 1. <its last error
line>"; a Vertex AI job's in Vertex's: "The replica workerpool0-0 exited with a non-zero status of
1. Termination reason: Error."), followed by its last error lines. When the same error takes down every replica (a crash
on import), the primary is named: after a secondary's failure the set waits a moment (as long as
the secondary took to fail, within bounds) for the primary, which started at the same time.

Synchronous training (MultiWorkerMirroredStrategy's collectives, ParameterServerStrategy's
coordinator losing a parameter server) cannot carry on when a peer dies: the primary fails too,
within seconds. A primary (or another secondary) that fails soon after a peer was killed is
therefore a casualty, not the end of the job while restarts remain: every replica is stopped and
started again, with the same TF_CONFIG, and the trainer resumes from its last checkpoint, as the
cluster would on the service.

All processes are started from the calling thread, which does not return before every one of
them is gone: the kernel's parent-death signal is tied to that thread.

Where a replica runs is the `ReplicaLauncher`'s business: by default a process of this machine
(`ProcessLauncher`); the Ray backend passes one that runs each replica on its own cluster node, so
both backends share these rules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import ReplicaGroup
from aiptrain._job.prebuilt import prebuilt_image_of
from aiptrain._job.spec import Job, JobState
from aiptrain._job.task_names import replica_of, vertex_task_name
from aiptrain._job.tf_config import (
    ReplicaTask,
    cluster_specs_for,
    pytorch_variables,
    replica_environment,
    replica_tasks,
    tf_configs_for,
)
from aiptrain._replicas.command import ProcessCommand, ReplicaCommand
from aiptrain._replicas.log_capture import SERVICE_TASK, LogSink, OutputTail, pump_stream
from aiptrain._replicas.machine_share import ReplicaShare
from aiptrain._replicas.ports import free_addresses
from aiptrain._replicas.processes import (
    TOKEN_VARIABLE,
    ManagedProcess,
    describe_returncode,
    kill_tokened_processes,
    start_process,
    stop_processes,
    wait_for_any_exit,
)

_POLL_SECONDS = 0.05
_MAX_RESTART_DELAY_SECONDS = 30.0
# A replica failing this soon after a peer was killed is taken as a casualty of that failure.
_PEER_FAILURE_WINDOW_SECONDS = 60.0
# After a secondary's non-retryable failure, how long the primary may take to fail the same way:
# as long as the secondary took, within these bounds.
_PRIMARY_SETTLE_MIN_SECONDS = 5.0
_PRIMARY_SETTLE_MAX_SECONDS = 60.0
# How long to wait for a pipe reader after its process ended (a grandchild may hold the pipe).
_PUMP_JOIN_SECONDS = 2.0
# Secondary replicas start first (as gcloud's local runner does), the primary last.
_START_ORDER = {"parameter_server": 0, "worker": 1, "evaluator": 2, "master": 3}


# (replica set spec, addresses) -> task name -> environment variables of that replica.
ClusterEnvironment = Callable[["ReplicaSetSpec", dict[str, list[str]]], dict[str, dict[str, str]]]


def service_environment(spec: ReplicaSetSpec, addresses: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """What AI Platform gave each replica: TF_CONFIG, CLUSTER_SPEC, AIP_* and CLOUD_ML_JOB_ID."""
    tf_configs = tf_configs_for(spec.job, spec.groups, addresses, spec.trial_id)
    cluster_specs = cluster_specs_for(spec.groups, addresses)
    pytorch = pytorch_variables(spec.groups, addresses) if _runs_prebuilt_pytorch(spec.job) else {}
    return {
        name: replica_environment(
            job_id=spec.visible_job_id or spec.job.job_id or "",
            tf_config=tf_configs[name],
            cluster_spec=cluster_specs[name],
            job_dir=spec.job_dir,
            trial=spec.trial_id,
        ) | pytorch.get(name, {})
        for name in tf_configs
    }


def _runs_prebuilt_pytorch(job: Job) -> bool:
    image = prebuilt_image_of(job.training_input, load_catalog()) if job.training_input is not None else None
    return image is not None and image.framework.startswith("PyTorch")


class ReplicaProcess(Protocol):
    """A started replica wherever it runs: its output pipes, whether it ended, its exit status."""

    @property
    def stdout(self) -> IO[bytes]: ...

    @property
    def stderr(self) -> IO[bytes]: ...

    def has_exited(self) -> bool: ...

    # Kill what is left of it and return its exit status (negative: killed by that signal).
    def reap(self) -> int: ...


class ReplicaLauncher(Protocol):
    """Starts, stops and sweeps up replica processes (on this machine, or on a cluster's nodes)."""

    def start(self, task_name: str, command: ReplicaCommand, env: dict[str, str], cwd: Path) -> ReplicaProcess: ...

    # SIGTERM, then SIGKILL after `grace` seconds, and reap.
    def stop(self, processes: list[ReplicaProcess], grace: float) -> None: ...

    # Kill every process left carrying AIPTRAIN_RUN_TOKEN `token` (or one under it).
    def sweep(self, token: str) -> None: ...


class ProcessLauncher:
    """Replicas as process groups of this machine, tied to the calling thread; each pinned to
    its cores in `cores` (task name -> CPU ids), if any."""

    def __init__(self, cores: Mapping[str, tuple[int, ...]] | None = None) -> None:
        self.cores = dict(cores or {})

    def start(self, task_name: str, command: ReplicaCommand, env: dict[str, str], cwd: Path) -> ReplicaProcess:
        if not isinstance(command, ProcessCommand):
            raise TypeError(f"{task_name} runs an image: its replica set needs a container launcher")
        cwd.mkdir(parents=True, exist_ok=True)
        return start_process(command.argv(), env=env, cwd=cwd, cores=self.cores.get(task_name, ()))

    def stop(self, processes: list[ReplicaProcess], grace: float) -> None:
        stop_processes([p for p in processes if isinstance(p, ManagedProcess)], grace)

    def sweep(self, token: str) -> None:
        kill_tokened_processes(token)


@dataclass(frozen=True)
class ReplicaSetSpec:
    """Everything needed to start one cluster."""

    job: Job  # its TrainingInput goes into TF_CONFIG["job"], its jobId into CLOUD_ML_JOB_ID
    groups: list[ReplicaGroup]
    # What each replica runs (task name -> its command), made by the job's context; the launcher
    # gets the same value.
    commands: Mapping[str, ReplicaCommand]
    job_dir: str | None  # the local output directory, as AIP_* name it
    work_dir: Path  # each replica runs in work_dir/<task name>
    run_token: str  # AIPTRAIN_RUN_TOKEN of this set's processes
    base_env: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)
    trial_id: str | None = None
    # Cluster addresses per TF_CONFIG task type; None probes free loopback ports.
    addresses: dict[str, list[str]] | None = None
    # Per-task variables given the addresses; None gives the service's (TF_CONFIG, CLUSTER_SPEC, AIP_*).
    cluster_environment: ClusterEnvironment | None = None
    # Every replica runs here instead of work_dir/<task name> (`local train` runs in the package root).
    shared_cwd: Path | None = None
    # Where the replicas run; None: processes of this machine.
    launcher: ReplicaLauncher | None = None
    # The job ID the replicas see in CLOUD_ML_JOB_ID when it is not the job's own (a job taken in
    # through another API, such as a Vertex AI CustomJob's numeric ID); None: the job's own ID.
    visible_job_id: str | None = None
    # The job was created as a Vertex AI job: a failure is worded as Vertex worded it (pool names,
    # "Termination reason: Error."), in the errorMessage and the log; else in ml v1's words.
    vertex_wording: bool = False
    # Each replica's share of this machine (task name -> share: its threads, cores, GPUs); None
    # leaves the replicas the whole machine (the Ray backend, whose nodes schedule their own).
    shares: Mapping[str, ReplicaShare] | None = None
    # False: the shares set no GPU variables (`local train`, whose replicas ask for no GPUs; container
    # replicas, which get their GPUs as device requests).
    share_gpus: bool = True


@dataclass(frozen=True)
class ReplicaPolicy:
    max_restarts: int = 3
    # Seconds before the first restart of a replica; each further restart waits twice as long.
    restart_delay: float = 1.0
    kill_grace: float = 5.0
    evaluator_grace: float = 60.0
    # False (local train): a secondary that keeps failing is reported, and the primary decides.
    fail_when_restarts_run_out: bool = True

    def delay_before_restart(self, restart: int) -> float:
        """How long restart number `restart` (1, 2, ...) of one replica waits."""
        return min(self.restart_delay * 2.0 ** (restart - 1), _MAX_RESTART_DELAY_SECONDS)


@dataclass(frozen=True)
class ReplicaSetOutcome:
    state: JobState  # SUCCEEDED, FAILED or CANCELLED
    error_message: str | None = None
    primary_returncode: int | None = None
    failed_task: str | None = None


class ReplicaObserver(Protocol):
    """Told about every start and exit (the supervisor records them in the store)."""

    def started(self, task_name: str, process: ManagedProcess, restarts: int) -> None: ...

    def exited(self, task_name: str, returncode: int) -> None: ...


@dataclass
class _Replica:
    task: ReplicaTask
    command: ReplicaCommand
    env: dict[str, str]
    cwd: Path
    tail: OutputTail = field(default_factory=OutputTail)
    process: ReplicaProcess | None = None
    pumps: list[threading.Thread] = field(default_factory=list)
    restarts: int = 0
    done: bool = False
    # monotonic() time at which an exited replica is started again; None when none is due.
    restart_at: float | None = None
    # monotonic() time of its last start.
    started_at: float = 0.0
    returncode: int | None = None  # set once the replica's exit was collected


def is_retryable(returncode: int) -> bool:
    """Killed rather than failed: by a signal, or a status of 128 + N (a shell reporting a signal).

    This is what a VM restart or a preemption looks like, the failures the service restarted
    replicas after; any other non-zero status is the trainer's own verdict.
    """
    return returncode < 0 or returncode >= 128


def service_replica_name(task_name: str) -> str:
    """`master-replica-0` -> `master 0`: how the service's errorMessage named a replica."""
    replica = replica_of(task_name)
    return f"{replica[0]} {replica[1]}" if replica is not None else task_name


def exit_reason(process: ReplicaProcess | None, returncode: int) -> str | None:
    """What a launcher's process knows of its end better than its status (a container whose engine
    went away: `ContainerProcess.exit_reason`); None for the rest."""
    explain = getattr(process, "exit_reason", None)
    return explain(returncode) if callable(explain) else None


def failure_headline(task_name: str, returncode: int, restarts: int = 0, reason: str | None = None, *,
                     vertex: bool = False) -> str:
    """ml v1's words: `The replica master 0 exited with a non-zero status of N.` / `... was killed by
    signal 9 (SIGKILL).`; with `vertex`, Vertex AI's: `The replica workerpool0-0 exited with a
    non-zero status of N. Termination reason: Error.` (its pool names; a signal is the status a
    container reports for it, 128 + N). `reason` says an end the status does not (an engine lost)."""
    plural = "s" if restarts != 1 else ""
    if vertex and reason is None:
        status = returncode if returncode > 0 else 128 - returncode
        text = f"The replica {vertex_task_name(task_name)} exited with a non-zero status of {status}. " \
               "Termination reason: Error."
        return text + (f" It had been restarted {restarts} time{plural}." if restarts else "")
    name = vertex_task_name(task_name) if vertex else service_replica_name(task_name)
    text = f"The replica {name} {reason or describe_returncode(returncode)}"
    if restarts:
        text += f" after {restarts} restart{plural}"
    return text + "."


def failure_message(task_name: str, returncode: int, tail: list[str], restarts: int = 0,
                    reason: str | None = None, *, vertex: bool = False) -> str:
    """A failed job's errorMessage: the headline (in Vertex AI's words with `vertex`) with the
    replica's last error line on the first line (what one-line listings show), then its last error
    lines, uncut."""
    text = failure_headline(task_name, returncode, restarts, reason, vertex=vertex)
    lines = [line for line in tail if line.strip()]
    if lines:
        text += f" {lines[-1].strip()}"
    if len(lines) > 1:  # a single line is already all there is
        text += "\n" + "\n".join(tail)
    return text


class _ReplicaSetRun:
    def __init__(
        self,
        spec: ReplicaSetSpec,
        policy: ReplicaPolicy,
        sink: LogSink,
        stop: threading.Event,
        observer: ReplicaObserver | None,
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.sink = sink
        self.stop = stop
        self.observer = observer
        self.replicas: list[_Replica] = []
        # The last secondary failure (task name, monotonic time), for telling casualties apart.
        self.last_peer_failure: tuple[str, float] | None = None
        self.cluster_restarts = 0
        self.launcher: ReplicaLauncher = spec.launcher or ProcessLauncher(
            {name: share.cores for name, share in (spec.shares or {}).items()})
        # True from the end of a stop_all until the next start: a second stop_all has nothing to do.
        self.stopped = False

    def say(self, message: str, severity: str = "INFO") -> None:
        self.sink.emit(SERVICE_TASK, severity, message, trial_id=self.spec.trial_id)

    # -- setting up ---------------------------------------------------------------------------

    def build(self) -> None:
        spec = self.spec
        addresses = spec.addresses if spec.addresses is not None else free_addresses(spec.groups)
        environments = (spec.cluster_environment or service_environment)(spec, addresses)
        role_env = {group.role: dict(group.env) for group in spec.groups}
        for task in sorted(replica_tasks(spec.groups), key=lambda t: _START_ORDER[t.role]):
            env = dict(spec.base_env)
            # The pool's own variables, under the service's: TF_CONFIG and the job's IDs stay true.
            env.update(role_env.get(task.role, {}))
            env.update(environments[task.task_name])
            env.update(spec.extra_env)
            share = (spec.shares or {}).get(task.task_name)
            if share is not None:
                env.update(share.environment(spec.base_env, gpus=spec.share_gpus)[0])
            # One token per replica, under the set's: its strays can be swept when it exits.
            env[TOKEN_VARIABLE] = f"{spec.run_token}/{task.task_name}"
            cwd = spec.shared_cwd or spec.work_dir / task.task_name
            self.replicas.append(_Replica(task, spec.commands[task.task_name], env, cwd))

    def start(self, replica: _Replica) -> None:
        self.stopped = False
        replica.tail.clear()
        process = self.launcher.start(replica.task.task_name, replica.command, replica.env, replica.cwd)
        replica.started_at = time.monotonic()
        replica.process = process
        replica.done = False
        replica.pumps = [
            threading.Thread(
                target=pump_stream,
                args=(stream,),
                kwargs={
                    "task_name": replica.task.task_name,
                    "from_stderr": from_stderr,
                    "sink": self.sink,
                    "tail": replica.tail,
                    "trial_id": self.spec.trial_id,
                },
                name=f"pump-{replica.task.task_name}-{'err' if from_stderr else 'out'}",
                daemon=True,
            )
            for stream, from_stderr in ((process.stdout, False), (process.stderr, True))
        ]
        for pump in replica.pumps:
            pump.start()
        if self.observer is not None and isinstance(process, ManagedProcess):
            self.observer.started(replica.task.task_name, process, replica.restarts)

    def collect(self, replica: _Replica, *, sweep: bool = True) -> int:
        """Reap an exited replica, kill what it left behind, drain its output, report the exit.

        `sweep=False` when the caller has just swept the whole set's token.
        """
        assert replica.process is not None
        returncode = replica.process.reap()
        if sweep:
            # Children that left its process group would otherwise keep its pipes (and readers) open.
            self.launcher.sweep(replica.env[TOKEN_VARIABLE])
        for pump in replica.pumps:
            pump.join(_PUMP_JOIN_SECONDS)
        replica.done = True
        replica.returncode = returncode
        if self.observer is not None:
            self.observer.exited(replica.task.task_name, returncode)
        return returncode

    # -- running ------------------------------------------------------------------------------

    def run(self) -> ReplicaSetOutcome:
        self.build()
        primary = next(r for r in self.replicas if r.task.is_primary)
        for replica in self.replicas:
            if self.stop.is_set():
                return self.cancelled()
            self.say(f"Starting {replica.task.task_name}: {replica.command.describe()}")
            try:
                self.start(replica)
            except OSError as error:
                return self.fail(replica.task.task_name, f"The replica {replica.task.task_name} "
                                 f"could not be started: {error}")
        while True:
            if self.stop.is_set():
                return self.cancelled()
            assert primary.process is not None
            if primary.process.has_exited():
                outcome = self.primary_ended(primary)
                if outcome is None:
                    continue  # every replica was restarted
                return outcome
            outcome = self.check_secondaries()
            if outcome is not None:
                return outcome
            self.pause([r for r in self.replicas if not r.done])

    def check_secondaries(self) -> ReplicaSetOutcome | None:
        for replica in self.replicas:
            if replica.task.is_primary or replica.process is None:
                continue
            name = replica.task.task_name
            if replica.restart_at is not None:
                if time.monotonic() >= replica.restart_at:
                    failed = self.restart(replica)
                    if failed is not None:
                        return failed
                continue
            if replica.done or not replica.process.has_exited():
                continue
            returncode = self.collect(replica)
            if returncode == 0:
                self.say(f"{name} exited successfully.")
                continue
            if not is_retryable(returncode) and self.recently_failed_peer() is None:
                if self.policy.fail_when_restarts_run_out:
                    return self.fail_fast(replica, returncode)
                self.say(f"{name} {describe_returncode(returncode)}; it is not restarted.", "WARNING")
                continue
            self.last_peer_failure = (name, time.monotonic())
            if replica.restarts < self.policy.max_restarts:
                replica.restarts += 1
                delay = self.policy.delay_before_restart(replica.restarts)
                self.say(
                    f"{name} {describe_returncode(returncode)}; restarting it in {delay:g} s "
                    f"(restart {replica.restarts} of {self.policy.max_restarts}).",
                    "WARNING",
                )
                replica.restart_at = time.monotonic() + delay
                continue
            if self.policy.fail_when_restarts_run_out:
                # The log already holds the replica's output; the headline is enough there.
                reason = exit_reason(replica.process, returncode)
                vertex = self.spec.vertex_wording
                self.say(failure_headline(name, returncode, replica.restarts, reason, vertex=vertex), "ERROR")
                return self.fail(name, failure_message(name, returncode, replica.tail.lines(), replica.restarts,
                                                       reason, vertex=vertex))
            self.say(f"{name} {describe_returncode(returncode)}; it is not restarted.", "WARNING")
        return None

    def primary_ended(self, primary: _Replica) -> ReplicaSetOutcome | None:
        """How the set ended, or None when the whole cluster was restarted instead."""
        name = primary.task.task_name
        returncode = self.collect(primary)
        if returncode != 0:
            peer = self.recently_failed_peer()
            if peer is not None and self.cluster_restarts < self.policy.max_restarts:
                return self.restart_cluster(f"{name} {describe_returncode(returncode)} after {peer} failed")
            return self.fail_fast(primary, returncode)
        self.say(f"{name} exited successfully.")
        evaluators = [r for r in self.replicas if r.task.role == "evaluator" and not r.done]
        if evaluators and self.policy.evaluator_grace > 0:
            self.say(
                f"Waiting up to {self.policy.evaluator_grace:g} s for "
                f"{', '.join(r.task.task_name for r in evaluators)} to finish."
            )
            self.wait_for(evaluators, self.policy.evaluator_grace)
            for evaluator in evaluators:
                if evaluator.process is not None and evaluator.process.has_exited():
                    returncode = self.collect(evaluator)
                    self.say(f"{evaluator.task.task_name} {describe_returncode(returncode)}.")
        self.stop_all()
        return ReplicaSetOutcome(JobState.SUCCEEDED, primary_returncode=0)

    def recently_failed_peer(self) -> str | None:
        """The secondary whose being killed probably took the failing replica down, if any."""
        # A peer killed in the same poll interval as this failure has not been collected yet.
        for replica in self.replicas:
            if replica.task.is_primary or replica.done or replica.process is None:
                continue
            if replica.process.has_exited() and replica.restart_at is None:
                returncode = self.collect(replica)
                if returncode != 0 and is_retryable(returncode):
                    self.last_peer_failure = (replica.task.task_name, time.monotonic())
                elif returncode != 0:
                    self.say(f"{replica.task.task_name} {describe_returncode(returncode)}.", "WARNING")
        if self.last_peer_failure is None:
            return None
        peer, when = self.last_peer_failure
        return peer if time.monotonic() - when <= _PEER_FAILURE_WINDOW_SECONDS else None

    def fail_fast(self, first: _Replica, returncode: int) -> ReplicaSetOutcome:
        """End the set after a non-retryable failure, naming the replica that failed first.

        When a secondary failed first while the primary still runs, the primary gets a moment to
        fail the same way (it started at the same time): an error on every replica, such as a
        crash on import, is then reported as the primary's, as the service did.
        """
        blamed, blamed_code = first, returncode
        primary = next(r for r in self.replicas if r.task.is_primary)
        if first is not primary and primary.process is not None and not primary.done:
            took = time.monotonic() - first.started_at
            settle = min(max(took, _PRIMARY_SETTLE_MIN_SECONDS), _PRIMARY_SETTLE_MAX_SECONDS)
            self.say(
                f"{first.task.task_name} {describe_returncode(returncode)}; this is not restarted "
                f"(the trainer's own error). Waiting up to {settle:.0f} s for {primary.task.task_name} "
                "before stopping the job.",
                "WARNING",
            )
            self.wait_for([primary], settle)
            if self.stop.is_set():
                return self.cancelled()
            if primary.process.has_exited():
                code = self.collect(primary)
                if code != 0:
                    blamed, blamed_code = primary, code
        name = blamed.task.task_name
        reason = exit_reason(blamed.process, blamed_code)
        vertex = self.spec.vertex_wording
        self.say(failure_headline(name, blamed_code, blamed.restarts, reason, vertex=vertex), "ERROR")
        message = failure_message(name, blamed_code, blamed.tail.lines(), blamed.restarts, reason, vertex=vertex)
        return self.fail(name, message, primary.returncode if primary.done else None)

    def restart_cluster(self, reason: str) -> ReplicaSetOutcome | None:
        """Stop every replica and start them all again after the back-off; None once restarted."""
        self.cluster_restarts += 1
        delay = self.policy.delay_before_restart(self.cluster_restarts)
        self.say(
            f"{reason}; restarting every replica in {delay:g} s so the cluster resumes from its "
            f"last checkpoint (cluster restart {self.cluster_restarts} of {self.policy.max_restarts}).",
            "WARNING",
        )
        self.stop_all()
        self.last_peer_failure = None
        if self.stop.wait(delay):
            return self.cancelled()
        for replica in self.replicas:
            replica.restarts += 1
            failed = self.restart(replica)
            if failed is not None:
                return failed
        return None

    def restart(self, replica: _Replica) -> ReplicaSetOutcome | None:
        """Start an exited replica again; the set's failure if it cannot be started."""
        replica.restart_at = None
        try:
            self.start(replica)
        except OSError as error:
            name = replica.task.task_name
            return self.fail(name, f"The replica {service_replica_name(name)} could not be restarted: {error}")
        return None

    def wait_for(self, replicas: list[_Replica], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.stop.is_set():
            running = [r for r in replicas if r.process is not None and not r.process.has_exited()]
            if not running:
                return
            self.pause(running)

    def pause(self, watched: list[_Replica]) -> None:
        """Wait one poll interval, or less if one of `watched` exits first (a replica's exit is
        seen at once where the kernel can say so; `stop` is checked every interval). Each of them
        must be running or collected after each pause, or the pause would end at once."""
        processes = [r.process for r in watched if isinstance(r.process, ManagedProcess)]
        if len(processes) != len(watched) or not wait_for_any_exit(processes, _POLL_SECONDS):
            self.stop.wait(_POLL_SECONDS)

    def cancelled(self) -> ReplicaSetOutcome:
        # A trial is stopped by its tuning job (early stopping, too many failures, a cancel), which
        # logs why; only a plain job's stop is always a cancel.
        trial = self.spec.trial_id
        self.say(f"Stopping all replicas of trial {trial}." if trial
                 else "Stopping all replicas: the job was cancelled.")
        self.stop_all()
        return ReplicaSetOutcome(JobState.CANCELLED)

    def fail(self, task_name: str, message: str, returncode: int | None = None) -> ReplicaSetOutcome:
        self.stop_all()
        return ReplicaSetOutcome(JobState.FAILED, message, returncode, task_name)

    def stop_all(self) -> None:
        """Stop every replica still running, then everything else carrying this set's token."""
        if self.stopped:
            return  # nothing was started since the last stop_all, which left nothing behind
        running = [r for r in self.replicas if r.process is not None and not r.done]
        if running:
            self.say(
                "Stopping " + ", ".join(r.task.task_name for r in running)
                + f" (SIGTERM, then SIGKILL after {self.policy.kill_grace:g} s)."
            )
        self.launcher.stop([r.process for r in running if r.process is not None], self.policy.kill_grace)
        # One sweep of the set's token covers every replica's (each is under it), before their
        # pipes are drained.
        self.launcher.sweep(self.spec.run_token)
        for replica in running:
            self.collect(replica, sweep=False)
        self.stopped = True


def run_replica_set(
    spec: ReplicaSetSpec,
    policy: ReplicaPolicy,
    sink: LogSink,
    stop: threading.Event,
    observer: ReplicaObserver | None = None,
) -> ReplicaSetOutcome:
    """Run one cluster until its primary ends (or `stop` is set) and say how it ended.

    Returns only after every process of the set is gone, whatever happens (exceptions too).
    Lines of the replicas go to `sink` with their task names; the set's own lines use the task
    name `service`. Safe to call from several threads at once with different specs.
    """
    run = _ReplicaSetRun(spec, policy, sink, stop, observer)
    try:
        return run.run()
    finally:
        run.stop_all()

