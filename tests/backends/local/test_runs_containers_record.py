"""Whether a job's replicas are containers is recorded with the job when it is prepared, and every
later reader (its replica sets, `jobs describe`) takes that record, never asks the job again."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, cast

import pytest

from aiptrain._backends.local.backend import LocalBackend
from aiptrain._backends.local.job_context import JobContext
from aiptrain._backends.local.layout import JobLayout
from aiptrain._backends.local.store import JobStore
from aiptrain._job.catalog import load_catalog
from aiptrain._job.cluster import resolve_cluster
from aiptrain._job.spec import Job, JobState
from aiptrain._replicas.cluster_plan import LocalPlan
from aiptrain._replicas.command import ProcessCommand
from aiptrain._replicas.containers import images
from aiptrain._replicas.containers.command import ContainerCommand
from aiptrain._replicas.settings import ReplicaSettings
from tests.fixtures.local_jobs import PROJECT, make_job, training_input

# The jobs table as the release before this record made it (every later table comes with the schema).
_PREVIOUS_JOBS_TABLE = """
CREATE TABLE jobs (
    key INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT NULL, job_id TEXT NOT NULL, state TEXT NOT NULL,
    resource TEXT NOT NULL, holds_slot INTEGER NOT NULL DEFAULT 0, cancel_requested INTEGER NOT NULL DEFAULT 0,
    supervisor_pid INTEGER, supervisor_start_ticks INTEGER, run_token TEXT NOT NULL, created_epoch REAL NOT NULL,
    vertex_job_id TEXT, runtime_environment TEXT, machine_share TEXT, UNIQUE (project, job_id)
)"""


def test_a_home_made_before_the_record_opens_and_its_jobs_read_back(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "jobs.db")
    old.execute(_PREVIOUS_JOBS_TABLE)
    old.execute("INSERT INTO jobs (project, job_id, state, resource, run_token, created_epoch, runtime_environment)"
                " VALUES (?, 'before', 'SUCCEEDED', '{\"jobId\": \"before\"}', 't', 1.0, '{\"notes\": [\"py\"]}')",
                (PROJECT,))
    old.execute("PRAGMA user_version = 1")  # another schema's checksum
    old.commit()
    old.close()

    store = JobStore(tmp_path)
    before = store.get(PROJECT, "before")
    assert (before.state, before.job.job_id, before.run_token) == (JobState.SUCCEEDED, "before", "t")
    assert before.runtime_environment == {"notes": ["py"]}
    assert before.runs_containers is None  # prepared before anyone recorded the answer
    key = store.insert_job(PROJECT, Job.model_validate({"jobId": "after"}), "t2").key
    store.set_runs_containers(key, True)
    store.close()
    reopened = JobStore(tmp_path)
    assert reopened.get(PROJECT, "after").runs_containers is True
    assert reopened.get(PROJECT, "before").runs_containers is None
    reopened.close()


def test_the_store_keeps_either_answer(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    key = store.insert_job(PROJECT, Job.model_validate({"jobId": "j"}), "t").key
    assert store.get_by_key(key).runs_containers is None
    store.set_runs_containers(key, False)
    assert store.get_by_key(key).runs_containers is False
    store.set_runs_containers(key, True)
    assert store.get_by_key(key).runs_containers is True
    store.close()


def test_the_job_context_makes_the_commands_the_recorded_answer_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An image job recorded as processes gets process commands, and the other way round: the
    context reads the record, not the job."""
    def asked(*_args: object, **_kwargs: object) -> bool:
        raise AssertionError("runs_containers asked again after PREPARING")

    monkeypatch.setattr(images, "runs_containers", asked)
    store = JobStore(tmp_path)
    job = Job.model_validate({"jobId": "image", "trainingInput": {
        "scaleTier": "BASIC", "pythonModule": "trainer.task", "masterConfig": {"imageUri": "gcr.io/p/t:1"}}})
    key = store.insert_job(PROJECT, job, "tok").key
    assert job.training_input is not None
    plan = LocalPlan(resolve_cluster(job.training_input, load_catalog()), [])

    def command(containers: bool) -> object:
        store.set_runs_containers(key, containers)
        context = JobContext(store=store, record=store.get_by_key(key), home=tmp_path,
                             layout=JobLayout.of(tmp_path, PROJECT, "image", key),
                             settings=ReplicaSettings(max_running=1, python="/envs/tf/bin/python"), plan=plan,
                             sink=cast(Any, None), stop=threading.Event(), tmpdir=tmp_path)
        return context.replica_commands([], None, [], None)[0]["master-replica-0"]

    assert isinstance(command(True), ContainerCommand)
    assert isinstance(command(False), ProcessCommand)
    store.close()


def test_describe_says_no_python_runtime_for_a_job_recorded_as_containers(
        backend: LocalBackend, package_uri: str) -> None:
    """Before its containers' own notes, a job prepared as containers is not described with the
    Python runtime its runtimeVersion would have named; one prepared as processes still is."""
    job = make_job("described", training_input(package_uri, "trainer.task", runtime="2.11",
                                                masterConfig={"imageUri": "gcr.io/p/t:1"}))
    store = backend.engine.store
    key = store.insert_job(PROJECT, job, "t").key
    store.set_runs_containers(key, False)
    as_processes = backend.describe_notes(backend.get_job("described"))
    assert any("2.11" in note for note in as_processes), as_processes
    store.set_runs_containers(key, True)
    as_containers = backend.describe_notes(backend.get_job("described"))
    assert not any("2.11" in note for note in as_containers), as_containers
