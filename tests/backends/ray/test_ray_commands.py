"""The Ray driver makes each replica's command once; it reaches the replica's actor, and there its
container launcher, as that same typed value (no argument list parsed back on the node)."""

from __future__ import annotations

import io
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.ray import replica_host
from aiptrain._backends.ray.driver import Driver, LinePrinter, RaySetRun
from aiptrain._backends.ray.replica_host import RayNodeLauncher, ReplicaHost
from aiptrain._job.spec import Job, TrainingInput
from aiptrain._replicas.command import ProcessCommand, ReplicaCommand
from aiptrain._replicas.containers import images
from aiptrain._replicas.containers.command import ContainerCommand

_ADDRESSES = {"master": ["10.0.0.1:2222"]}


def _driver(training_input: dict[str, Any], storage: Path, *, containers: bool) -> Driver:
    job = Job(job_id="typed", training_input=TrainingInput.model_validate(training_input))
    payload = {"job": job.to_api(), "storageRoot": str(storage), "containers": {"pull": False} if containers else None,
               "restartPolicy": {"maxRestarts": 0, "restartDelay": 1, "killGrace": 1, "evaluatorGrace": 1}}
    return Driver(payload, LinePrinter(io.StringIO()), threading.Event())


@pytest.fixture
def answer_already_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver reads whether the replicas are containers from its payload, never the job again."""
    def asked(*_args: object, **_kwargs: object) -> bool:
        raise AssertionError("runs_containers asked again on the Ray driver")

    monkeypatch.setattr(images, "runs_containers", asked)


class _Remote:
    """An actor method as the driver calls it: the arguments are pickled, as Ray does."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> Any:
        self.calls.append(pickle.loads(pickle.dumps(args)))
        return self.answer


class _Actor:
    def __init__(self) -> None:
        self.start = _Remote(1234)
        self.read = _Remote(([], 0, None))


@pytest.mark.usefixtures("answer_already_recorded")
def test_a_container_replica_s_command_reaches_its_actor_as_the_driver_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = _driver({"masterConfig": {"imageUri": "gcr.io/p/t:1"}, "args": ["--data", "gs://bkt/data"]}, tmp_path,
                     containers=True)
    assert driver.runs_containers
    run = RaySetRun(driver, "3", threading.Event())
    trial_args = ["--data", "gs://bkt/data", "--lr", "0.1"]
    spec = run.replica_set(_ADDRESSES, trial_args, "gs://bkt/out/3", {}, ["--lr", "0.1"])
    made = spec.commands["master-replica-0"]
    # The job's args on the node's storage, the trial's flags, then --job-dir, as on the local backend.
    assert made == ContainerCommand("gcr.io/p/t:1", None, (
        "--data", str(tmp_path / "bkt" / "data"), "--lr", "0.1", "--job-dir", str(tmp_path / "bkt" / "out" / "3")))

    import ray

    monkeypatch.setattr(ray, "get", lambda answer: answer)
    actor = _Actor()
    RayNodeLauncher({"master-replica-0": actor}).start("master-replica-0", made, {"TF_CONFIG": "{}"}, Path()).reap()
    arrived, env = actor.start.calls[0]
    assert type(arrived) is ContainerCommand and arrived == made
    assert env == {"TF_CONFIG": "{}"}


def test_a_process_replica_runs_the_trainer_module_with_its_node_s_python(tmp_path: Path) -> None:
    driver = _driver({"pythonModule": "trainer.task", "args": ["--lr", "0.1"]}, tmp_path, containers=False)
    assert not driver.runs_containers
    spec = RaySetRun(driver, None, threading.Event()).replica_set(_ADDRESSES, ["--lr", "0.1"], None, {}, [])
    assert spec.commands["master-replica-0"] == ProcessCommand("python", "trainer.task", ("--lr", "0.1"))


class _ContainerProcess:
    def __init__(self) -> None:
        self.stdout, self.stderr, self.pid = io.BytesIO(b"hi\n"), io.BytesIO(), 4321

    def reap(self) -> int:
        return 0

    def has_exited(self) -> bool:
        return True


class _Containers:
    """A replica's ContainerLauncher on its node, recording what it was asked to start."""

    def __init__(self) -> None:
        self.started: list[ReplicaCommand] = []

    def start(self, task_name: str, command: ReplicaCommand, env: dict[str, str], cwd: Path) -> _ContainerProcess:
        self.started.append(command)
        return _ContainerProcess()


def test_the_replica_s_actor_hands_its_container_launcher_the_command_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(replica_host, "SCRATCH_ROOT", tmp_path)
    host = ReplicaHost("typed", "master-replica-0")
    containers = _Containers()
    host.containers = containers
    command = ContainerCommand("gcr.io/p/t:1", ("sh", "-c"), ("echo hi",))
    try:
        assert host.start(command, {}) == 4321
        assert containers.started == [command] and containers.started[0] is command
        assert host.read(wait=5)[0] == [(1, b"hi\n")]
    finally:
        host.containers = None
        host.cleanup()
