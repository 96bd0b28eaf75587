"""The entrypoint of an aiptrain job on Ray: `python -m aiptrain._backends.ray.driver`.

It runs inside the Ray job (its working directory holds `aiptrain-job.json` and the staged
packages) and prints the job's log on stdout in `joblog`'s line format. Its life:

1. QUEUED: reserve one placement-group bundle per replica (SPREAD across nodes); while the
   cluster has no room, say what is missing and keep waiting (an autoscaler may add nodes);
2. PREPARING: start one `ReplicaHost` actor on each bundle; each finds or builds the runtime's
   environment on its node (one build per node) and installs the packages there, then probes a
   free port; the real node addresses make TF_CONFIG;
3. RUNNING: `run_replica_set` of the local engine, with replicas on the actors: the same
   TF_CONFIG contract, log prefixes and restart rules as on the local backend;
4. the end: `Job completed successfully.` (exit 0), `Job failed: MESSAGE` (exit 1) or
   `Job cancelled.` (SIGTERM from `ray job stop`).

A hyperparameter tuning job runs the local engine's study (`runner.tuning_job.run_tuning`) with
`tuning_host.RayTuningHost`: each trial is such a replica set, with its own placement group and
actors, up to maxParallelTrials at once; trials that do not fit yet wait for room. The job's
trainingOutput (the trials) is printed as a `joblog.OUTPUT_PREFIX` line whenever it changes.

The placement group and the actors belong to this process: when it ends, or is killed, Ray
removes them, and each trainer dies with its actor (parent-death signal).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from aiptrain._backends.ray import joblog
from aiptrain._backends.ray.cancel_signal import CancelSignal
from aiptrain._backends.ray.node_preparation import READY
from aiptrain._backends.ray.plan import PACKAGE_STORE_DIR, PAYLOAD_FILE
from aiptrain._backends.ray.preparation_log import PreparationLog
from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, JobState, TrainingInput
from aiptrain._job.tf_config import replica_tasks
from aiptrain._replicas.clock import utc_now
from aiptrain._replicas.command import ProcessCommand, ReplicaCommand, for_every_replica
from aiptrain._replicas.gs_paths import GS_PREFIX, local_location, rewrite_args
from aiptrain._replicas.replica_set import ReplicaPolicy, ReplicaSetOutcome, ReplicaSetSpec, run_replica_set

# Seconds the placement group may take before the job says it is waiting for room.
_ROOM_NOTICE_SECONDS = 3.0
# How long one read of a replica's preparation waits for news.
READ_PREPARATION_SECONDS = 1.0


def actor_name(job_id: str, task_name: str, trial_id: str | None = None) -> str:
    """The name of a replica's actor, as Ray's state API and dashboard show it."""
    return f"aiptrain-{job_id}-" + (f"trial-{trial_id}-" if trial_id else "") + task_name


class LinePrinter:
    """A LogSink printing `joblog` lines on stdout, with non-decreasing timestamps."""

    def __init__(self, out: Any = None) -> None:
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        self.last: datetime | None = None

    def emit(self, task_name: str, severity: str, message: str, *, trial_id: str | None = None,
             captured: datetime | None = None, from_stderr: bool = False) -> None:
        with self.lock:
            now = utc_now()
            stamp = now if self.last is None else max(self.last, now)
            self.last = stamp
            self.out.write(joblog.format_line(stamp, severity, task_name, message, trial_id) + "\n")
            self.out.flush()

    def say(self, message: str, severity: str = "INFO", trial_id: str | None = None) -> None:
        self.emit(joblog.SERVICE_TASK, severity, message, trial_id=trial_id)


def _available(ray: Any) -> str:
    free = ray.available_resources()
    parts = [f"{free.get('CPU', 0):g} CPU", f"{free.get('memory', 0) / 1024**3:.2f} GiB"]
    if free.get("GPU"):
        parts.append(f"{free['GPU']:g} GPU")
    return ", ".join(parts)


def _bundle_text(bundle: dict[str, Any]) -> str:
    res = bundle["resources"]
    gpus = f", {res['GPU']:g} GPU" if res.get("GPU") else ""
    return f"{bundle['taskName']} {res['CPU']:g} CPU, {res['memory'] / 1024**3:.2f} GiB{gpus}"


class RaySetRun:
    """One replica set on the cluster (a job's, or one tuning trial's): its placement group, one
    actor per bundle, then the local engine's `run_replica_set`. Everything is released at the end."""

    def __init__(self, driver: Driver, trial_id: str | None, stop: threading.Event) -> None:
        self.driver = driver
        self.trial_id = trial_id
        self.stop = stop
        self.run_token = driver.run_token + (f"/trial-{trial_id}" if trial_id else "")
        self.placement_group: Any = None
        self.actors: dict[str, Any] = {}

    def say(self, message: str, severity: str = "INFO") -> None:
        self.driver.printer.emit(joblog.SERVICE_TASK, severity, message, trial_id=self.trial_id)

    def run(self, ray: Any, args: list[str], job_dir: str | None, extra_env: dict[str, str],
            extra_args: list[str] | None = None) -> ReplicaSetOutcome:
        try:
            if not self.reserve(ray):
                return ReplicaSetOutcome(JobState.CANCELLED)
            if self.trial_id is None:
                self.say(joblog.PREPARING_LINE)
            failure = self.start_hosts(ray)
            if failure is not None:
                return failure
            addresses = self.addresses(ray)
            if self.stop.is_set():
                return ReplicaSetOutcome(JobState.CANCELLED)
            if self.trial_id is None:
                self.say(joblog.RUNNING_LINE)
            spec = self.replica_set(addresses, args, job_dir, extra_env, extra_args or [])
            return run_replica_set(spec, self.driver.policy, self.driver.printer, self.stop)
        finally:
            self.release(ray)

    def reserve(self, ray: Any) -> bool:
        """Wait until the placement group is placed; False if the set was stopped meanwhile."""
        from ray.util.placement_group import placement_group

        bundles = self.driver.payload["bundles"]
        self.placement_group = placement_group([b["resources"] for b in bundles],
                                               strategy=self.driver.payload["placementStrategy"],
                                               name=actor_name(self.driver.job_id, "", self.trial_id).rstrip("-"))
        ready = self.placement_group.ready()
        waited = 0.0
        while not self.stop.is_set():
            done, _ = ray.wait([ready], timeout=0.5)
            if done:
                return True
            waited += 0.5
            if waited == _ROOM_NOTICE_SECONDS:
                self.say(
                    f"{joblog.WAITING_PREFIX}{len(bundles)} replica(s) need "
                    f"{'; '.join(_bundle_text(b) for b in bundles)}; the cluster has {_available(ray)} free. "
                    + ("The job stays QUEUED until they fit (or it is cancelled)." if self.trial_id is None
                       else f"Trial {self.trial_id} waits until they fit."), "WARNING")
        return False

    def start_hosts(self, ray: Any) -> ReplicaSetOutcome | None:
        """One actor per bundle, each prepared on its node (`prepare`). The failure, if any."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from aiptrain._backends.ray.replica_host import ReplicaHost

        host_class = ray.remote(ReplicaHost)
        for index, bundle in enumerate(self.driver.payload["bundles"]):
            res = bundle["resources"]
            task_name = bundle["taskName"]
            strategy = PlacementGroupSchedulingStrategy(self.placement_group, placement_group_bundle_index=index)
            self.actors[task_name] = host_class.options(
                num_cpus=res["CPU"], num_gpus=res.get("GPU", 0), memory=res["memory"], max_concurrency=8,
                scheduling_strategy=strategy, name=actor_name(self.driver.job_id, task_name, self.trial_id),
            ).remote(self.driver.job_id, task_name, self.trial_id)
        places = {name: actor.where.remote() for name, actor in self.actors.items()}
        nodes: dict[str, tuple[str, str]] = {}  # task -> (node id, label)
        for name, ref in places.items():
            try:
                where = ray.get(ref)
            except ray.exceptions.RayError as crash:
                return ReplicaSetOutcome(JobState.FAILED, f"The replica {name} could not be placed on the cluster: "
                                         f"{_first_line(crash)}", failed_task=name)
            nodes[name] = (where["nodeId"], node_label(where))
            # With the cluster's own Python the replica runs with the actor's; else its environment's.
            python = f", Python {where['python']}" if self.driver.payload.get("packagesMode") == "cluster" else ""
            self.say(f"{name} runs on node {nodes[name][1]}, host {where['hostname']}{python}.")
        if self.driver.runs_containers:
            return self.open_containers(ray, nodes)
        return NodesPreparation(self, ray, nodes).run()

    def open_containers(self, ray: Any, nodes: dict[str, tuple[str, str]]) -> ReplicaSetOutcome | None:
        """PREPARING of a container job: each replica's actor finds its node's engine and the image
        there (pulled if the job may pull), or says why it cannot run it. The failure, if any."""
        images = {task.task_name: group.image_uri for group in self.driver.groups
                  for task in replica_tasks([group])}
        pending = {}
        ran_in: list[str] = []
        for bundle in self.driver.payload["bundles"]:
            task, res = bundle["taskName"], bundle["resources"]
            pending[task] = self.actors[task].open_container.remote({
                "image": images[task], "cpus": res["CPU"], "memory": res["memory"],
                "jobToken": self.driver.run_token, "runToken": self.run_token,
                "storageRoot": str(self.driver.storage_root), "pull": self.driver.payload["containers"]["pull"]})
        for task, ref in pending.items():
            try:
                lines, error = ray.get(ref)
            except ray.exceptions.RayError as crash:
                lines, error = [], f"its Ray actor is gone ({_first_line(crash)})"
            for line in lines:
                self.say(line)
            ran_in += [f"{line} (node {nodes[task][1]})" for line in lines]
            if error is not None:
                return ReplicaSetOutcome(JobState.FAILED, f"The replica {task} cannot run its container on node "
                                         f"{nodes[task][1]}: {error}", failed_task=task)
        self.say(joblog.RAN_IN_PREFIX + json.dumps(ran_in))  # for `jobs describe`, left out of the log
        return None

    def addresses(self, ray: Any) -> dict[str, list[str]]:
        """TF_CONFIG task type -> `IP:PORT` per replica, each probed on the replica's own node."""
        tasks = replica_tasks(self.driver.groups)
        refs = {task.task_name: self.actors[task.task_name].address.remote() for task in tasks}
        table: dict[str, list[str]] = {}
        for task in tasks:
            table.setdefault(task.task_type, []).append(ray.get(refs[task.task_name]))
        return table

    def replica_set(self, addresses: dict[str, list[str]], args: list[str], job_dir: str | None,
                    extra_env: dict[str, str], extra_args: list[str]) -> ReplicaSetSpec:
        from aiptrain._backends.ray.replica_host import RayNodeLauncher

        storage_root = self.driver.storage_root
        args, changes = rewrite_args(args, storage_root)
        for change in changes:
            self.say(f"Using storage for {change.uri}: {change.path}")
        if job_dir and job_dir.startswith(GS_PREFIX):
            mapped = local_location(job_dir, storage_root)
            self.say(f"Using storage for --job-dir {job_dir}: {mapped}")
            job_dir = mapped
        return ReplicaSetSpec(
            job=self.driver.job,
            groups=self.driver.groups,
            commands=self.commands(args, job_dir, extra_args),
            job_dir=job_dir,
            work_dir=Path("replicas"),
            run_token=self.run_token,
            base_env={},
            extra_env=extra_env,
            trial_id=self.trial_id,
            addresses=addresses,
            launcher=RayNodeLauncher(self.actors),
            # A Vertex AI job `local serve` took in: its numeric ID in CLOUD_ML_JOB_ID, Vertex's words.
            visible_job_id=self.driver.vertex_job_id,
            vertex_wording=self.driver.vertex_job_id is not None,
        )

    def commands(self, args: list[str], job_dir: str | None, extra_args: list[str]) -> dict[str, ReplicaCommand]:
        """Each replica's command, made here and handed to its actor as it is: its container (the
        job's args, on the node's storage, then a trial's flags, as on the local backend), or the
        trainer module (`args` already hold a trial's flags) run by its node's own interpreter."""
        training_input = self.driver.training_input
        if self.driver.runs_containers:
            from aiptrain._replicas.containers.replica_containers import replica_containers

            job_args, _ = rewrite_args(list(training_input.args or []), self.driver.storage_root)
            containers = replica_containers(training_input, self.driver.groups, load_catalog(), args=job_args,
                                            job_dir=job_dir, job_dir_argument=self.driver.job_dir_argument,
                                            extra_args=extra_args)
            return {replica.task_name: replica.command for replica in containers}
        # "python": a stand-in; each node's actor runs it with its runtime environment's interpreter.
        command = ProcessCommand("python", training_input.python_module or "", tuple(args), job_dir,
                                 self.driver.job_dir_argument)
        return for_every_replica(self.driver.groups, command)

    def release(self, ray: Any) -> None:
        """Remove the replicas' directories from their nodes, then the actors and the bundles."""
        with contextlib.suppress(Exception):  # an actor whose node is gone took its files with it
            ray.wait([actor.cleanup.remote() for actor in self.actors.values()], num_returns=len(self.actors),
                     timeout=30)
        for actor in self.actors.values():
            with contextlib.suppress(Exception):  # already gone
                ray.kill(actor)
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):
                remove_placement_group(self.placement_group)


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return next((line for line in reversed(lines) if "ERROR" in line or "rror:" in line), lines[-1] if lines else
                type(error).__name__)


def node_label(where: dict[str, str]) -> str:
    """How the log names a node: its address and the start of its Ray node id (two nodes may share an address)."""
    return f"{where['ip']} ({where['nodeId'][:8]})"


class NodesPreparation:
    """PREPARING of one replica set: on each node one replica's actor first finds or builds the
    runtime's environment (a second replica there would only wait for the node's build lock),
    then the node's other replicas prepare on it. Progress and failures name the node."""

    def __init__(self, run: RaySetRun, ray: Any, nodes: dict[str, tuple[str, str]]) -> None:
        payload = run.driver.payload
        self.run_set = run
        self.ray = ray
        self.nodes = nodes
        self.request = {
            "packageUris": list(run.driver.training_input.package_uris or []),
            # Relative: each actor finds the packages in its own node's copy of the working directory.
            "storeDir": PACKAGE_STORE_DIR,
            "runToken": f"{run.run_token}/prepare",
            "killGrace": run.driver.policy.kill_grace,
            "packagesMode": payload.get("packagesMode", "build"),
            "runtime": payload["runtime"],
        }
        builds = self.request["packagesMode"] != "cluster"
        self.log = PreparationLog(str(payload["runtime"]["runtime"]["version"]),
                                  {task: label for task, (_node, label) in nodes.items()}, builds=builds)
        leaders: dict[str, str] = {}
        for task, (node_id, _label) in nodes.items():
            leaders.setdefault(node_id, task)
        self.first = list(leaders.values()) if builds else list(nodes)
        self.later = [task for task in nodes if task not in self.first]
        self.polls: dict[str, Any] = {}  # task -> its pending poll

    def begin(self, tasks: list[str]) -> None:
        # Begun before the first poll: a threaded actor runs calls in any order.
        self.ray.get([self.run_set.actors[task].begin_prepare.remote(self.request) for task in tasks])
        for task in tasks:
            self.polls[task] = self.run_set.actors[task].poll_prepare.remote(READ_PREPARATION_SECONDS)

    def run(self) -> ReplicaSetOutcome | None:
        ray = self.ray
        self.begin(self.first)
        while self.polls:
            if self.run_set.stop.is_set():
                self.cancel()
                return ReplicaSetOutcome(JobState.CANCELLED)
            ready, _ = ray.wait(list(self.polls.values()), num_returns=1, timeout=READ_PREPARATION_SECONDS)
            for ref in ready:
                task = next(name for name, pending in self.polls.items() if pending == ref)
                failure = self.read(task, ref)
                if failure is not None:
                    self.cancel()
                    return failure
            self.say(self.log.heartbeat(time.monotonic()))
        mismatch = self.log.mismatch()
        return ReplicaSetOutcome(JobState.FAILED, mismatch) if mismatch else None

    def read(self, task: str, ref: Any) -> ReplicaSetOutcome | None:
        """One poll's answer: its lines said, the next poll sent, the task's failure if it failed."""
        ray = self.ray
        try:
            events, outcome = ray.get(ref)
        except ray.exceptions.RayActorError as crash:
            del self.polls[task]
            return ReplicaSetOutcome(JobState.FAILED, f"The replica {task} could not be prepared on node "
                                     f"{self.nodes[task][1]}: its Ray actor is gone ({_first_line(crash)})",
                                     failed_task=task)
        now = time.monotonic()
        for kind, severity, message in events:
            self.say(self.log.event(task, kind, severity, message, now))
            if kind == READY and task in self.first:
                # The node's environment is there: its other replicas find it now, while this one
                # installs the trainer package.
                node_id = self.nodes[task][0]
                self.begin([other for other in self.later if self.nodes[other][0] == node_id])
        if outcome is None:
            self.polls[task] = self.run_set.actors[task].poll_prepare.remote(READ_PREPARATION_SECONDS)
            return None
        del self.polls[task]
        if outcome["cancelled"]:
            return ReplicaSetOutcome(JobState.CANCELLED)
        if outcome["error"] is not None:
            return ReplicaSetOutcome(JobState.FAILED, self.log.failure(task, outcome["error"]), failed_task=task)
        self.log.finished(task)
        return None

    def cancel(self) -> None:
        """Stop every preparation still running (a build's processes killed, its half-built
        environment removed) before the actors go."""
        ray = self.ray
        grace = self.run_set.driver.policy.kill_grace + 5
        refs = [self.run_set.actors[task].cancel_prepare.remote(grace) for task in self.polls]
        self.polls.clear()
        with contextlib.suppress(Exception):  # an actor that is gone took its processes with it
            ray.wait(refs, num_returns=len(refs), timeout=grace + 5)

    def say(self, lines: list[tuple[str, str]]) -> None:
        for severity, message in lines:
            self.run_set.say(message, severity)


class Driver:
    def __init__(self, payload: dict[str, Any], printer: LinePrinter, stop: threading.Event) -> None:
        self.payload = payload
        self.job = Job.model_validate(payload["job"])
        self.training_input = self.job.training_input or TrainingInput()
        self.job_id = self.job.job_id or ""
        self.printer = printer
        self.stop = stop
        policy = payload["restartPolicy"]
        self.policy = ReplicaPolicy(max_restarts=int(policy["maxRestarts"]),
                                    restart_delay=float(policy["restartDelay"]),
                                    kill_grace=float(policy["killGrace"]),
                                    evaluator_grace=float(policy["evaluatorGrace"]))
        self.groups = resolve_cluster(self.training_input, load_catalog())
        self.storage_root = Path(payload["storageRoot"])
        self.run_token = f"aiptrain-ray/{self.job_id}"
        # Whether the replicas are containers: the answer the plan recorded in the payload at submit.
        self.runs_containers = payload.get("containers") is not None
        self.vertex_job_id: str | None = payload.get("vertexJobId")
        # A Vertex AI job gets its directories through AIP_* only, as on Vertex: no --job-dir argument.
        self.job_dir_argument = self.vertex_job_id is None

    def run(self, ray: Any) -> ReplicaSetOutcome:
        for note in self.payload.get("notes", []):
            self.printer.say(note, "WARNING")
        for note in self.payload.get("runtimeNotes", []):
            self.printer.say(note)
        if self.training_input.hyperparameters is None:
            return self.run_set(ray, trial_id=None, stop=self.stop)
        from aiptrain._backends.ray.tuning_host import RayTuningHost
        from aiptrain._tuning.tuning_run import run_tuning

        # The study's trials each wait for room on their own: the job itself runs from the start.
        self.printer.say(joblog.PREPARING_LINE)
        self.printer.say(joblog.RUNNING_LINE)
        with tempfile.TemporaryDirectory(prefix="aiptrain-ray-trials-") as trials_dir:
            return run_tuning(RayTuningHost(self, ray, Path(trials_dir)))

    def run_set(self, ray: Any, *, trial_id: str | None, stop: threading.Event, extra_args: list[str] | None = None,
                job_dir: str | None = None, extra_env: dict[str, str] | None = None) -> ReplicaSetOutcome:
        """The job's cluster once (a trial passes its id, its arguments and its --job-dir)."""
        args = [*(self.training_input.args or []), *(extra_args or [])]
        job_dir = job_dir if trial_id is not None else self.training_input.job_dir
        return RaySetRun(self, trial_id, stop).run(ray, args, job_dir, dict(extra_env or {}), extra_args)


def finish(printer: LinePrinter, outcome: ReplicaSetOutcome) -> int:
    """The final line (the state the backend reports) and the driver's exit code."""
    if outcome.state == JobState.SUCCEEDED:
        printer.say(joblog.SUCCEEDED_LINE)
        return 0
    if outcome.state == JobState.FAILED:
        printer.say(joblog.FAILED_PREFIX + (outcome.error_message or "the job failed"), "ERROR")
        return 1
    printer.say(joblog.CANCELLED_LINE)
    return 0


def main(argv: list[str] | None = None) -> int:
    payload = json.loads(Path(PAYLOAD_FILE).read_text(encoding="utf-8"))
    printer = LinePrinter()
    stop = threading.Event()
    cancel = CancelSignal(printer.say, stop)

    import ray

    ray.init(log_to_driver=False, logging_level=logging.ERROR)
    # After ray.init, which installs a SIGTERM handler of its own that exits at once: `ray job stop`
    # must let the replicas be stopped and the job end with its own line.
    cancel.install()
    try:
        outcome = Driver(payload, printer, stop).run(ray)
    except Exception as error:
        import traceback

        for line in "".join(traceback.format_exception(error)).rstrip().splitlines():
            printer.say(line, "ERROR")
        outcome = ReplicaSetOutcome(JobState.FAILED, f"Internal error in the aiptrain Ray driver: {error!r}")
    cancel.settle()
    return finish(printer, outcome)


if __name__ == "__main__":
    sys.exit(main())
