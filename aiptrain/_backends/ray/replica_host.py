"""One replica on its Ray node: the actor that runs the trainer process, and the driver's proxy.

`ReplicaHost` is a plain class made a Ray actor by the driver (`ray.remote(ReplicaHost)`), placed
on the replica's placement-group bundle and holding its resources (so a GPU replica sees its
CUDA_VISIBLE_DEVICES). On its node it prepares the replica (`node_preparation`: the runtime's
environment, built or found in the node's cache, then the job's packages into a site directory
of its own), probes a free port, and runs the trainer as a process group with that environment's
Python, the given environment and `PYTHONPATH` = that site directory. Output lines are buffered
until the driver reads them.

A trial of a tuning job names its cloudml-hypertune file (CLOUD_ML_HP_METRIC_FILE) as a path of
the driver's; the actor points the trainer at a file on its own node instead and hands its
content back with the output, and the proxy writes it where the driver's study reads it.

`RemoteReplicaProcess` is the driver's view of that process, shaped like a local one (pipes,
`has_exited`, `reap`), so `run_replica_set` applies the local engine's restart rules unchanged;
`RayNodeLauncher` starts, stops and sweeps replicas through their actors. An actor that dies (its node
went away, its worker was killed) ends its replica as if killed by SIGKILL, with a line saying so.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from aiptrain._backends.ray.node_preparation import NodePreparation
from aiptrain._replicas.command import ProcessCommand, ReplicaCommand
from aiptrain._replicas.log_capture import MAX_LINE_BYTES
from aiptrain._replicas.processes import ManagedProcess, kill_tokened_processes, start_process, stop_processes
from aiptrain._replicas.replica_set import ReplicaProcess
from aiptrain._replicas.scratch import JOB_TEMP_PREFIX
from aiptrain._tuning.metrics import METRIC_FILE_VARIABLE

# How long one `read` call waits for output before returning empty-handed.
READ_WAIT_SECONDS = 1.0
SCRATCH_ROOT = Path(tempfile.gettempdir()) / "aiptrain-ray"


def _node_ip() -> str:
    import ray

    address: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return address


class ReplicaHost:
    """The Ray actor of one replica (created with `ray.remote(ReplicaHost).options(...)`)."""

    def __init__(self, submission_id: str, task_name: str, trial_id: str | None = None) -> None:
        self.task_name = task_name
        self.job_root = SCRATCH_ROOT / "jobs" / submission_id
        self.root = self.job_root / (f"trial-{trial_id}" if trial_id else "") / task_name
        self.site_dir = self.root / "site"
        self.work_dir = self.root / "work"
        self.process: ManagedProcess | None = None
        self.preparation: NodePreparation | None = None
        self.python = sys.executable  # the runtime environment's, once prepared
        self.condition = threading.Condition()
        self.pending: collections.deque[tuple[int, bytes]] = collections.deque()  # (stream 1/2, line)
        self.open_streams = 0
        self.returncode: int | None = None
        self.metric_file: Path | None = None  # the trainer's CLOUD_ML_HP_METRIC_FILE on this node
        self.metric_seen: tuple[int, int] | None = None  # (mtime_ns, size) last handed over
        self.containers: Any = None  # a ContainerLauncher when the replica runs an image
        self.guard: Any = None  # removes the replica's container if this actor dies
        # The trainer's TMPDIR (a short path: Unix sockets are made in it), removed with the
        # replica; left, with `root`, only by a node that crashed.
        self.tmpdir: Path | None = None

    def where(self) -> dict[str, str]:
        import ray

        return {"ip": _node_ip(), "nodeId": ray.get_runtime_context().get_node_id(),
                "hostname": socket.gethostname(), "python": sys.executable}

    def begin_prepare(self, request: dict[str, Any]) -> None:
        """Start preparing this replica on its node (`node_preparation`): its runtime environment,
        then its trainer package; `poll_prepare` follows it, `cancel_prepare` stops it."""
        self.preparation = NodePreparation(request, self.site_dir)

    def poll_prepare(self, wait: float) -> tuple[list[tuple[str, str, str]], dict[str, Any] | None]:
        """The preparation's events since the last poll, and its outcome once it ended."""
        assert self.preparation is not None
        events, outcome = self.preparation.poll(wait)
        if outcome is not None and outcome.python:
            self.python = outcome.python
        return events, None if outcome is None else dataclasses.asdict(outcome)

    def cancel_prepare(self, timeout: float) -> bool:
        """Stop the preparation, its processes killed and a half-built environment removed; whether
        it ended within `timeout` seconds."""
        return self.preparation is None or self.preparation.cancel(timeout)

    def open_container(self, request: dict[str, Any]) -> tuple[list[str], str | None]:
        """Make ready to run the replica's image on this node's engine (found with the node's own
        settings): (lines for the job's log, or the error that keeps it from running here)."""
        import ray

        from aiptrain._replicas.containers.cleanup import RemovalGuard
        from aiptrain._replicas.containers.command import ContainerCommand, ContainerLimits
        from aiptrain._replicas.containers.container_engine import find_engine
        from aiptrain._replicas.containers.labels import RUN_LABEL
        from aiptrain._replicas.containers.launcher import ContainerLauncher, ReplicaContainer
        from aiptrain._replicas.containers.settings import ContainerSettings
        from aiptrain.errors import AiptrainError

        try:
            engine = find_engine(ContainerSettings.from_env())
            gpus = tuple(int(gpu) for gpu in ray.get_gpu_ids())
            limits = ContainerLimits(cpus=float(request["cpus"]), memory_bytes=int(request["memory"]), gpus=gpus)
            storage = str(request["storageRoot"])
            self.containers = ContainerLauncher(
                engine, [ReplicaContainer(self.task_name, ContainerCommand(str(request["image"])), limits)],
                job_token=str(request["jobToken"]), run_token=str(request["runToken"]),
                mounts={storage: f"{storage}:rw"}, pull=bool(request["pull"]), host_network=True)
            self.guard = RemovalGuard(engine, f"{RUN_LABEL}={request['runToken']}", [self.containers.workspace])
            self.containers.open()
        except AiptrainError as error:
            return [], error.message
        return self.containers.notes(), None

    def address(self) -> str:
        """`IP:PORT` of this node, the port free a moment ago."""
        from aiptrain._replicas.ports import free_ports

        return f"{_node_ip()}:{free_ports(1)[0]}"

    def start(self, command: ReplicaCommand, env: dict[str, str]) -> int:
        """Start the replica's command: its container, or the trainer with the replica's Python (its
        runtime environment's); its pid (the container's `start --attach`'s)."""
        if self.process is not None and not self.process.has_exited():
            raise RuntimeError(f"{self.task_name} is still running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        full_env = dict(os.environ)
        full_env.update(env)
        full_env["PYTHONPATH"] = str(self.site_dir)
        self.metric_file, self.metric_seen = None, None
        if METRIC_FILE_VARIABLE in env:
            self.metric_file = self.root / "hypertune.metrics"
            self.metric_file.unlink(missing_ok=True)
            full_env[METRIC_FILE_VARIABLE] = str(self.metric_file)
        with self.condition:
            self.pending.clear()
            self.returncode = None
            self.open_streams = 2
        process: ManagedProcess
        if self.containers is not None:  # the set's variables only: none of this node's own
            container_env = dict(env)
            if self.metric_file is not None:
                container_env[METRIC_FILE_VARIABLE] = str(self.metric_file)
            process = self.containers.start(self.task_name, command, container_env, self.work_dir)
        else:
            if not isinstance(command, ProcessCommand):
                raise TypeError(f"{self.task_name} runs an image, and no container was opened for it")
            if self.tmpdir is None:
                SCRATCH_ROOT.mkdir(parents=True, exist_ok=True)
                self.tmpdir = Path(tempfile.mkdtemp(prefix=JOB_TEMP_PREFIX, dir=SCRATCH_ROOT))
            full_env["TMPDIR"] = str(self.tmpdir)
            process = start_process(command.with_python(self.python).argv(), env=full_env, cwd=self.work_dir)
        self.process = process
        for number, stream in ((1, process.stdout), (2, process.stderr)):
            threading.Thread(target=self._pump, args=(number, stream), daemon=True).start()
        return process.pid

    def _pump(self, number: int, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
                with self.condition:
                    self.pending.append((number, raw if raw.endswith(b"\n") else raw + b"\n"))
                    self.condition.notify_all()
        with self.condition:
            self.open_streams -= 1
            if self.open_streams == 0 and self.process is not None:
                self.returncode = self.process.reap()
            self.condition.notify_all()

    def read(self, wait: float = READ_WAIT_SECONDS) -> tuple[list[tuple[int, bytes]], int | None, str | None]:
        """Output lines since the last read, the exit status once the process ended and its output
        is drained (None while it runs), and the metric file's content if it changed; waits up to
        `wait` seconds for output or the end."""
        with self.condition:
            self.condition.wait_for(lambda: bool(self.pending) or self.returncode is not None, wait)
            lines = list(self.pending)
            self.pending.clear()
            returncode = self.returncode if not self.pending else None
        return lines, returncode, self._changed_metrics()

    def _changed_metrics(self) -> str | None:
        if self.metric_file is None:
            return None
        try:
            stat = self.metric_file.stat()
            if (stat.st_mtime_ns, stat.st_size) == self.metric_seen:
                return None
            self.metric_seen = (stat.st_mtime_ns, stat.st_size)
            return self.metric_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    def stop(self, grace: float) -> None:
        if self.process is not None and self.containers is not None:
            self.containers.stop([self.process], grace)
        elif self.process is not None:
            stop_processes([self.process], grace)

    def sweep(self, token: str) -> list[int]:
        return kill_tokened_processes(token)

    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def cleanup(self) -> None:
        """Remove this replica's container and its directories (site-packages, working directory,
        TMPDIR) from its node."""
        if self.containers is not None:
            self.containers.close()
        if self.guard is not None:
            self.guard.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        parent = self.root.parent
        while parent != self.job_root.parent:  # the trial's and the job's, once their last replica's is gone
            with contextlib.suppress(OSError):
                parent.rmdir()
            parent = parent.parent


def _replace_text(path: Path, text: str) -> None:
    """Write `path` at once (the study may read it at any moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def read_summary_on_node(directory: str, tag: str, request: dict[str, Any]) -> tuple[Any, str | None]:
    """A Ray task: the last value of `tag` in the summary events under `directory`, read with the
    replicas' Python on this node (their runtime environment, found or built): (MetricReport or
    None, error or None)."""
    from aiptrain._backends.ray.node_preparation import node_python
    from aiptrain._environments.for_job import JobEnvironmentFailed
    from aiptrain._tuning.metrics import SummaryReadError, read_summary_metric

    try:
        return read_summary_metric(node_python(request), directory, tag, dict(os.environ)), None
    except (SummaryReadError, JobEnvironmentFailed) as error:
        return None, error.message if isinstance(error, JobEnvironmentFailed) else str(error)


class RemoteReplicaProcess:
    """A replica process on a Ray node, seen from the driver as a local process with pipes."""

    def __init__(self, actor: Any, task_name: str, metric_file: str | None = None) -> None:
        self.actor = actor
        self.task_name = task_name
        self.metric_file = Path(metric_file) if metric_file else None
        out_read, self._out_write = os.pipe()
        err_read, self._err_write = os.pipe()
        self._stdout = os.fdopen(out_read, "rb")
        self._stderr = os.fdopen(err_read, "rb")
        self._returncode: int | None = None
        self._ended = threading.Event()
        threading.Thread(target=self._feed, name=f"feed-{task_name}", daemon=True).start()

    @property
    def stdout(self) -> IO[bytes]:
        return self._stdout

    @property
    def stderr(self) -> IO[bytes]:
        return self._stderr

    def _feed(self) -> None:
        import ray

        try:
            while True:
                lines, returncode, metrics = ray.get(self.actor.read.remote(READ_WAIT_SECONDS))
                if metrics is not None and self.metric_file is not None:
                    _replace_text(self.metric_file, metrics)
                for number, line in lines:
                    os.write(self._out_write if number == 1 else self._err_write, line)
                if returncode is not None:
                    self._returncode = returncode
                    return
        except ray.exceptions.RayError as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            os.write(self._err_write, f"The Ray actor of {self.task_name} is gone (its node or worker died): "
                                      f"{first}\n".encode())
            self._returncode = -signal.SIGKILL
        finally:
            os.close(self._out_write)
            os.close(self._err_write)
            self._ended.set()

    def has_exited(self) -> bool:
        return self._ended.is_set()

    def reap(self) -> int:
        self._ended.wait()
        assert self._returncode is not None
        return self._returncode


class RayNodeLauncher:
    """Runs each replica through its `ReplicaHost` actor (task name -> actor handle)."""

    def __init__(self, actors: dict[str, Any]) -> None:
        self.actors = actors

    def start(self, task_name: str, command: ReplicaCommand, env: dict[str, str], cwd: Path) -> ReplicaProcess:
        """`cwd` is ignored: each replica runs in a directory of its own on its node. `command` goes
        to the actor as it is (Ray pickles it)."""
        import ray

        actor = self.actors[task_name]
        try:
            ray.get(actor.start.remote(command, env))
        except ray.exceptions.RayError as error:
            raise OSError(f"its Ray actor is gone (its node or worker died): {error}") from None
        return RemoteReplicaProcess(actor, task_name, env.get(METRIC_FILE_VARIABLE))

    def stop(self, processes: list[ReplicaProcess], grace: float) -> None:

        refs = [process.actor.stop.remote(grace) for process in processes if isinstance(process, RemoteReplicaProcess)]
        self._gather(refs)
        for process in processes:
            process.reap()

    def sweep(self, token: str) -> None:
        """A replica's own token sweeps its node; the set's token sweeps every node."""
        own = [actor for name, actor in self.actors.items() if token.endswith("/" + name)]
        self._gather([actor.sweep.remote(token) for actor in (own or list(self.actors.values()))])

    @staticmethod
    def _gather(refs: list[Any]) -> None:
        import ray

        for ref in refs:
            try:
                ray.get(ref)
            except ray.exceptions.RayError:
                pass  # a dead actor's processes died with it (parent-death signal)
