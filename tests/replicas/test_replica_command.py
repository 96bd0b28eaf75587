"""A replica's command goes from whoever made it to the launcher as the same typed value."""

from __future__ import annotations

import io
import pickle
import threading
from pathlib import Path
from typing import IO

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, JobState, TrainingInput
from aiptrain._replicas.command import ProcessCommand, ReplicaCommand, for_every_replica
from aiptrain._replicas.containers.command import ContainerCommand
from aiptrain._replicas.log_capture import CallbackSink
from aiptrain._replicas.replica_set import (
    ProcessLauncher,
    ReplicaPolicy,
    ReplicaProcess,
    ReplicaSetSpec,
    run_replica_set,
)


class _Exited:
    """A replica that has already ended with status 0."""

    def __init__(self) -> None:
        self._out, self._err = io.BytesIO(b"done\n"), io.BytesIO()

    @property
    def stdout(self) -> IO[bytes]:
        return self._out

    @property
    def stderr(self) -> IO[bytes]:
        return self._err

    def has_exited(self) -> bool:
        return True

    def reap(self) -> int:
        return 0


class _RecordingLauncher:
    def __init__(self) -> None:
        self.started: dict[str, ReplicaCommand] = {}

    def start(self, task_name: str, command: ReplicaCommand, env: dict[str, str], cwd: Path) -> ReplicaProcess:
        self.started[task_name] = command
        return _Exited()

    def stop(self, processes: list[ReplicaProcess], grace: float) -> None:
        pass

    def sweep(self, token: str) -> None:
        pass


def _container_job() -> tuple[Job, list[ContainerCommand]]:
    training_input = TrainingInput.model_validate({
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": 1,
        "masterConfig": {"imageUri": "gcr.io/p/trainer:1", "containerCommand": ["sh", "-c"],
                         "containerArgs": ["echo $0", "master"]},
        "workerConfig": {"imageUri": "gcr.io/p/worker:1"},
        "args": ["--epochs", "3"],
    })
    commands = [ContainerCommand("gcr.io/p/trainer:1", ("sh", "-c"), ("echo $0", "master")),
                ContainerCommand("gcr.io/p/worker:1", None, ("--epochs", "3"))]
    return Job(job_id="typed_commands", training_input=training_input), commands


def test_each_replica_s_launcher_gets_the_very_command_its_set_was_given(tmp_path: Path) -> None:
    job, (master, worker) = _container_job()
    assert job.training_input is not None
    groups = resolve_cluster(job.training_input, load_catalog())
    commands: dict[str, ReplicaCommand] = {"master-replica-0": master, "worker-replica-0": worker}
    launcher = _RecordingLauncher()
    spec = ReplicaSetSpec(job=job, groups=groups, commands=commands, job_dir=None, work_dir=tmp_path,
                          run_token="typed/run", base_env={}, launcher=launcher,
                          addresses={"master": ["master-replica-0:2222"], "worker": ["worker-replica-0:2222"]})
    lines: list[str] = []
    sink = CallbackSink(lambda _task, _severity, message, _err: lines.append(message))
    outcome = run_replica_set(spec, ReplicaPolicy(), sink, threading.Event())
    assert outcome.state == JobState.SUCCEEDED
    # The same objects, not argument lists made from them and parsed back.
    assert launcher.started["master-replica-0"] is master
    assert launcher.started["worker-replica-0"] is worker
    assert "Starting master-replica-0: --entrypoint=sh gcr.io/p/trainer:1 -c 'echo $0' master" in lines


def test_a_process_command_keeps_the_job_dir_rule_and_runs_on_a_node_s_own_python() -> None:
    command = ProcessCommand("python", "trainer.task", ("--lr", "0.1"), "/out")
    assert command.argv() == ["python", "-m", "trainer.task", "--lr", "0.1", "--job-dir", "/out"]
    # Vertex AI jobs get their directory through AIP_* only.
    vertex = ProcessCommand("python", "trainer.task", ("--lr", "0.1"), "/out", job_dir_argument=False)
    assert vertex.argv() == ["python", "-m", "trainer.task", "--lr", "0.1"]
    assert command.with_python("/envs/tf/bin/python").argv()[0] == "/envs/tf/bin/python"
    assert command.with_python("/envs/tf/bin/python").argv()[1:] == command.argv()[1:]


@pytest.mark.parametrize("command", [
    ProcessCommand("python", "trainer.task", ("--lr", "0.1"), "/out"),
    ContainerCommand("gcr.io/p/t:1", ("sh", "-c"), ("echo hi",)),
])
def test_a_command_crosses_to_a_ray_actor_as_it_is(command: ReplicaCommand) -> None:
    """Ray pickles what an actor call is given: the value arrives whole, of its own type."""
    arrived = pickle.loads(pickle.dumps(command))
    assert type(arrived) is type(command)
    assert arrived == command


def test_every_replica_of_a_trainer_package_runs_one_command() -> None:
    training_input = TrainingInput.model_validate({"scaleTier": "STANDARD_1", "pythonModule": "trainer.task"})
    groups = resolve_cluster(training_input, load_catalog())
    command = ProcessCommand("python", "trainer.task")
    commands = for_every_replica(groups, command)
    assert set(commands) == {name for group in groups for name in group.task_names()}
    assert len(commands) > 1 and all(value is command for value in commands.values())


def test_each_launcher_refuses_the_other_kind_of_command(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="container launcher"):
        ProcessLauncher().start("master-replica-0", ContainerCommand("gcr.io/p/t:1"), {}, tmp_path)
