"""`local train`: run a trainer in the foreground, the way `gcloud ai-platform local train` did.

Same flags and semantics (no packaging; replicas run from the package's parent directory;
`--job-dir` appended after the user arguments; with `--distributed`, 2 parameter servers and
2 workers by default; evaluators outside the cluster), with these differences, on purpose:
- the primary is always `chief` (gcloud imported TensorFlow to choose; we never do);
- ports are probed free unless `--start-port` is given (then consecutive from it, like gcloud);
- every output line is prefixed with its task (`[worker-replica-1] ...`) and stays on the stream
  the replica wrote it to, as gcloud's inherited pipes did; aiptrain's own notes
  (`[aiptrain] ...`) go to stderr, like every command's progress;
- replicas run in a runtime version's environment (`--runtime-version`, default the newest), the
  one a submitted job with that runtime gets; AIPTRAIN_LOCAL_PYTHON (without the flag) runs them
  with that interpreter instead, the way gcloud used the Python on PATH;
- `gs://` in `--job-dir` and in the arguments reaches the local store through the storage endpoint,
  as on the local backend (`AIPTRAIN_LOCAL_GCS=rewrite`: rewritten to local paths instead);
- when the primary ends, the other replicas are stopped (SIGTERM, then SIGKILL), and Ctrl-C
  stops them all before KeyboardInterrupt reaches the caller;
- the cores are split equally among the replicas (thread pools sized to a part, each pinned to
  its own cores where they fit), as submitted jobs share them by machine type, unless
  AIPTRAIN_LOCAL_CPU_SHARE says otherwise; GPUs are left as they are.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from aiptrain._gcs_endpoint.service import replica_base_environment, replica_storage
from aiptrain._job.cluster import ReplicaGroup
from aiptrain._job.spec import Job, JobState
from aiptrain._job.tf_config import replica_tasks
from aiptrain._paths import aiptrain_home
from aiptrain._replicas.command import ProcessCommand, for_every_replica
from aiptrain._replicas.gs_paths import GS_PREFIX, localize
from aiptrain._replicas.log_capture import SERVICE_TASK, CallbackSink
from aiptrain._replicas.machine_share import JobShare, ReplicaAsk, ReplicaShare, share_job
from aiptrain._replicas.ports import consecutive_addresses
from aiptrain._replicas.replica_set import ReplicaPolicy, ReplicaSetOutcome, ReplicaSetSpec, run_replica_set
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain._replicas.this_machine import this_machine
from aiptrain._storage.local import default_storage_root
from aiptrain.errors import OperationalError, UsageError

PRIMARY = "chief"
DEFAULT_DISTRIBUTED_WORKERS = 2
DEFAULT_DISTRIBUTED_PARAMETER_SERVERS = 2
_OWN_PREFIX = "aiptrain"


def local_train_groups(
    distributed: bool, worker_count: int | None, parameter_server_count: int | None, evaluator_count: int
) -> list[ReplicaGroup]:
    """The replicas `local train` starts (evaluators only with --distributed, as in gcloud)."""
    groups = [ReplicaGroup("master", PRIMARY, 1, None)]
    if not distributed:
        return groups
    workers = DEFAULT_DISTRIBUTED_WORKERS if worker_count is None else worker_count
    servers = DEFAULT_DISTRIBUTED_PARAMETER_SERVERS if parameter_server_count is None else parameter_server_count
    for role, task_type, count in (
        ("worker", "worker", workers),
        ("parameter_server", "ps", servers),
        ("evaluator", "evaluator", evaluator_count),
    ):
        if count < 0:
            raise UsageError(f"the {role.replace('_', ' ')} count {count} is negative")
        if count:
            groups.append(ReplicaGroup(role, task_type, count, None))
    return groups


def local_tf_configs(
    module_name: str, args: list[str], groups: list[ReplicaGroup], addresses: dict[str, list[str]],
    distributed: bool,
) -> dict[str, dict[str, Any]]:
    """Task name -> TF_CONFIG in gcloud's local form: keys job, task, cluster, environment."""
    job = {"job_name": module_name, "args": args}
    if not distributed:
        return {
            task.task_name: {"job": job, "task": {}, "cluster": {}, "environment": "cloud"}
            for task in replica_tasks(groups)
        }
    # gcloud's key order: the primary, then ps, then worker; evaluators are never members.
    order = {"master": 0, "parameter_server": 1, "worker": 2}
    cluster = {
        group.task_type: addresses[group.task_type]
        for group in sorted((g for g in groups if g.role in order), key=lambda g: order[g.role])
    }
    return {
        task.task_name: {
            "job": job,
            "task": {"type": task.task_type, "index": task.index},
            "cluster": cluster,
            "environment": "cloud",
        }
        for task in replica_tasks(groups)
    }


def run_local_training(
    package_path: Path,
    module_name: str,
    *,
    job_dir: str | None,
    user_args: list[str],
    distributed: bool,
    worker_count: int | None,
    parameter_server_count: int | None,
    evaluator_count: int,
    start_port: int | None,
    out: TextIO,
    err: TextIO,
    python: str | None = None,
    storage_root: Path | None = None,
    runtime_version: str | None = None,
    python_version: str | None = None,
) -> int:
    """Run the trainer until its primary ends; return the primary's exit code.

    A primary killed by a signal gives 128 + the signal number, as a shell reports it.
    Raises KeyboardInterrupt (after stopping every replica) on Ctrl-C, and OperationalError if
    a replica cannot be started at all.
    """
    settings = ReplicaSettings.from_env()
    package_root = Path(os.path.abspath(package_path)).parent
    if not package_root.is_dir():
        raise UsageError(f"{package_root} is not a directory", hint="--package-path names the package directory")
    write_lock = threading.Lock()

    def write(task_name: str, _severity: str, message: str, from_stderr: bool = False) -> None:
        own = task_name == SERVICE_TASK
        stream = err if own or from_stderr else out
        with write_lock:
            stream.write(f"[{_OWN_PREFIX if own else task_name}] {message}\n")
            stream.flush()

    sink = CallbackSink(write)
    interpreter = python or _interpreter(runtime_version, python_version, settings,
                                         lambda line: write(SERVICE_TASK, "INFO", line))
    root = storage_root or default_storage_root()

    def note(message: str) -> None:
        write(SERVICE_TASK, "INFO", message)

    with replica_storage(aiptrain_home(), root, settings.gcs, note) as storage:
        args, local_dir = list(user_args), job_dir
        if storage is None:  # AIPTRAIN_LOCAL_GCS=rewrite; else the trainer gets them as given
            local = localize(args, job_dir, root)
            for line in local.notes:
                note(line)
            args, local_dir = local.args, local.job_dir
            if job_dir and job_dir.startswith(GS_PREFIX) and local_dir:
                Path(local_dir).mkdir(parents=True, exist_ok=True)
        base_env = replica_base_environment(os.environ, storage)
        groups = local_train_groups(distributed, worker_count, parameter_server_count, evaluator_count)
        shares = _cpu_shares(groups, settings, note)
        outcome = _run_cluster(module_name, args, local_dir, groups, base_env, sink, settings=settings,
                               distributed=distributed, interpreter=interpreter, start_port=start_port,
                               package_root=package_root, shares=shares)
    if outcome.primary_returncode is None:
        if outcome.state == JobState.SUCCEEDED:
            return 0
        raise OperationalError(outcome.error_message or "the trainer could not be run")
    code = outcome.primary_returncode
    return 128 - code if code < 0 else code


def _cpu_shares(
    groups: list[ReplicaGroup], settings: ReplicaSettings, note: Callable[[str], None],
) -> dict[str, ReplicaShare] | None:
    """Equal parts of this machine's cores (the replicas name no machine type); GPUs are left as
    they are, since `local train` has no accelerators to ask for. None with the CPU share off."""
    if not settings.sizes_threads:
        return None
    machine = this_machine(gpus=False)
    asks = [ReplicaAsk(name, 0) for group in groups for name in group.task_names()]
    share = share_job(asks, machine, pin=settings.pins_cores)
    assert isinstance(share, JobShare)  # nobody asks for a GPU: nothing to wait for
    for line in share.lines():
        note(f"Share of this machine: {line}")
    return {replica.task_name: replica for replica in share.lanes[0]}


def _run_cluster(
    module_name: str, args: list[str], local_dir: str | None, groups: list[ReplicaGroup], base_env: dict[str, str],
    sink: CallbackSink, *, settings: ReplicaSettings, distributed: bool, interpreter: str, start_port: int | None,
    package_root: Path, shares: dict[str, ReplicaShare] | None,
) -> ReplicaSetOutcome:
    """The foreground replica set, with gcloud's local TF_CONFIG."""
    trainer_args = [*args, "--job-dir", local_dir] if local_dir else args

    def environment(spec: ReplicaSetSpec, addresses: dict[str, list[str]]) -> dict[str, dict[str, str]]:
        configs = local_tf_configs(module_name, trainer_args, spec.groups, addresses, distributed)
        return {name: {"TF_CONFIG": json.dumps(config), "PYTHONUNBUFFERED": "1"} for name, config in configs.items()}

    with tempfile.TemporaryDirectory(prefix="aiptrain-local-train-") as scratch:
        spec = ReplicaSetSpec(
            job=Job(job_id="local_train"),
            groups=groups,
            commands=for_every_replica(groups, ProcessCommand(interpreter, module_name, tuple(args), local_dir)),
            job_dir=local_dir,
            work_dir=Path(scratch),
            run_token=f"local-train-{secrets.token_hex(8)}",
            base_env=base_env,
            addresses=consecutive_addresses(groups, start_port) if start_port is not None else None,
            cluster_environment=environment,
            shared_cwd=package_root,
            shares=shares,
            share_gpus=False,
        )
        policy = ReplicaPolicy(
            max_restarts=0,
            kill_grace=settings.kill_grace,
            evaluator_grace=settings.evaluator_grace,
            fail_when_restarts_run_out=False,
        )
        return run_replica_set(spec, policy, sink, threading.Event())


def _interpreter(runtime_version: str | None, python_version: str | None, settings: ReplicaSettings,
                 say: Callable[[str], None]) -> str:
    """The Python the replicas run with: the runtime's environment (built now if needed)."""
    if settings.python_override and runtime_version is None and python_version is None:
        return settings.python
    from aiptrain._environments.for_job import environment_in_foreground
    from aiptrain._job.catalog import load_catalog
    from aiptrain._paths import aiptrain_home

    catalog = load_catalog()
    version = runtime_version or catalog.newest_runtime_version

    def note(line: str, severity: str) -> None:
        say(f"warning: {line}" if severity == "WARNING" else line)

    return environment_in_foreground(version, catalog, aiptrain_home(), note, python=python_version).python
