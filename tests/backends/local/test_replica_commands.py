"""What each replica of a local job runs: made once per task by the job's context, from the answer
PREPARING recorded (containers or processes), never by asking the job again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import pytest

from aiptrain._backends.local.job_context import JobContext
from aiptrain._backends.local.layout import JobLayout
from aiptrain._backends.local.store import JobRecord
from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, JobState, TrainingInput
from aiptrain._replicas.cluster_plan import LocalPlan
from aiptrain._replicas.command import ProcessCommand
from aiptrain._replicas.containers import images
from aiptrain._replicas.containers.command import ContainerCommand
from aiptrain._replicas.settings import ReplicaSettings

_IMAGE_JOB = {"scaleTier": "BASIC", "masterConfig": {"imageUri": "gcr.io/p/t:1"}, "args": ["--epochs", "3"]}
_MODULE_JOB = {"scaleTier": "STANDARD_1", "pythonModule": "trainer.task", "args": ["--epochs", "3"]}


@pytest.fixture(autouse=True)
def answer_already_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def asked(*_args: object, **_kwargs: object) -> bool:
        raise AssertionError("runs_containers asked again after PREPARING")

    monkeypatch.setattr(images, "runs_containers", asked)


def _context(home: Path, training_input: dict[str, Any], *, runs_containers: bool,
             vertex_job_id: str | None = None) -> JobContext:
    parsed = TrainingInput.model_validate(training_input)
    record = JobRecord(key=1, project="p", job_id="commands", state=JobState.RUNNING,
                       job=Job(job_id="commands", training_input=parsed), holds_slot=True, cancel_requested=False,
                       supervisor_pid=None, supervisor_start_ticks=None, run_token="tok", created_epoch=0.0,
                       vertex_job_id=vertex_job_id, runs_containers=runs_containers)
    return JobContext(store=cast(Any, None), record=record, home=home, layout=JobLayout.of(home, "p", "commands", 1),
                      settings=ReplicaSettings(max_running=1, python="/envs/tf/bin/python"),
                      plan=LocalPlan(resolve_cluster(parsed, load_catalog()), []), sink=cast(Any, None),
                      stop=threading.Event(), tmpdir=home)


def test_a_job_prepared_as_containers_gives_each_replica_its_container_command(tmp_path: Path) -> None:
    context = _context(tmp_path, _IMAGE_JOB, runs_containers=True)
    commands, replicas = context.replica_commands(["--epochs", "3"], "/out/7", ["--lr", "0.1"], None)
    expected = ContainerCommand("gcr.io/p/t:1", None, ("--epochs", "3", "--lr", "0.1", "--job-dir", "/out/7"))
    assert commands == {"master-replica-0": expected}
    # The launcher's containers carry the very values the replica set hands it.
    assert [(replica.task_name, replica.command) for replica in replicas] == [("master-replica-0", expected)]
    assert replicas[0].command is commands["master-replica-0"]


def test_a_job_prepared_as_processes_runs_the_trainer_module_on_every_replica(tmp_path: Path) -> None:
    context = _context(tmp_path, _MODULE_JOB, runs_containers=False)
    commands, replicas = context.replica_commands(["--epochs", "3", "--lr", "0.1"], "/out", [], None)
    expected = ProcessCommand("/envs/tf/bin/python", "trainer.task", ("--epochs", "3", "--lr", "0.1"), "/out")
    assert replicas == []
    assert len(commands) > 1 and set(commands.values()) == {expected}
    # A Vertex AI job the emulator took in: its directory through AIP_* only, not --job-dir.
    vertex = _context(tmp_path, _MODULE_JOB, runs_containers=False, vertex_job_id="123")
    command = vertex.replica_commands(["--epochs", "3"], "/out", [], None)[0]["master-replica-0"]
    assert isinstance(command, ProcessCommand) and "--job-dir" not in command.argv()


def test_the_context_follows_the_answer_recorded_at_preparing_not_the_job(tmp_path: Path) -> None:
    """The one answer is PREPARING's: a context told "containers" makes container commands, one told
    "processes" makes process commands, whatever it could infer from the job or its engine."""
    as_containers = _context(tmp_path, _IMAGE_JOB, runs_containers=True)
    assert as_containers.engine is None  # no longer how the context tells containers apart
    assert isinstance(as_containers.replica_commands([], None, [], None)[0]["master-replica-0"], ContainerCommand)
    as_processes = _context(tmp_path, {**_IMAGE_JOB, "pythonModule": "trainer.task"}, runs_containers=False)
    assert isinstance(as_processes.replica_commands([], None, [], None)[0]["master-replica-0"], ProcessCommand)
