"""`local prune --outputs` never deletes what a job that stays writes to or below, however its
paths are spelled (a trailing slash, `//`, `.`, a folder below or above), and says what it kept and why.

The jobs are rows of a real store (no supervisor runs them: a queued row is a job that will run);
their files are real files under the home's storage.
"""

from __future__ import annotations

import posixpath
import secrets
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.local.retention import plan_prune, prune
from aiptrain._backends.local.store import JobStore
from aiptrain._job.spec import Job
from aiptrain._job.state import JobState
from aiptrain._paths import HomeLayout

PROJECT = "keep-project"


def _job(store: JobStore, job_id: str, state: JobState, *, job_dir: str | None = None,
         packages: list[str] | None = None) -> None:
    training_input: dict[str, Any] = {"region": "us-central1", "pythonModule": "trainer.task",
                                      "packageUris": packages or []}
    if job_dir is not None:
        training_input["jobDir"] = job_dir
    record = store.insert_job(PROJECT, Job.model_validate({"jobId": job_id, "trainingInput": training_input}),
                              secrets.token_hex(12))
    if state is not JobState.QUEUED:
        store.transition(record.key, state)


def _file(home: Path, uri: str) -> Path:
    path = HomeLayout(home).storage / posixpath.normpath(uri.removeprefix("gs://"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("written by a job\n")
    return path


@pytest.fixture
def store(home: Path) -> Any:
    opened = JobStore(home)
    yield opened
    opened.close()


# (pruned job's --job-dir, kept job's --job-dir): the kept job writes to or below the pruned one's, or
# the pruned one's is inside the kept one's.
OVERLAPPING = [
    ("gs://bkt/out", "gs://bkt/out/"),
    ("gs://bkt/out/", "gs://bkt/out"),
    ("gs://bkt/out", "gs://bkt/out/sub"),
    ("gs://bkt/out", "gs://bkt//out"),
    ("gs://bkt/out", "gs://bkt/./out/sub/"),
    ("gs://bkt/out", "gs://bkt/out/x/../sub"),
    ("gs://bkt/out/sub", "gs://bkt/out"),
    ("gs://bkt", "gs://bkt/out"),
]


@pytest.mark.parametrize("kept_state", [JobState.RUNNING, JobState.QUEUED, JobState.SUCCEEDED])
@pytest.mark.parametrize(("pruned_dir", "kept_dir"), OVERLAPPING)
def test_outputs_a_kept_job_writes_to_stay(home: Path, store: JobStore, pruned_dir: str, kept_dir: str,
                                           kept_state: JobState) -> None:
    _job(store, "old", JobState.SUCCEEDED, job_dir=pruned_dir)
    _job(store, "stays", kept_state, job_dir=kept_dir)
    pruned_file = _file(home, pruned_dir.rstrip("/") + "/model.txt")
    kept_file = _file(home, kept_dir.rstrip("/") + "/checkpoint.txt")

    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")], outputs=True)
    assert [job.job_id for job in plan.jobs] == ["old"]
    assert plan.outputs == []
    [kept] = plan.kept
    assert kept.path == HomeLayout(home).storage.joinpath(*pruned_dir.removeprefix("gs://").strip("/").split("/"))
    assert "stays" in kept.reason and kept_dir in kept.reason

    prune(store, plan)
    assert kept_file.read_text() == "written by a job\n"
    assert pruned_file.exists()  # inside the kept job's tree, or its parent: not the prune's to delete


def test_a_sibling_with_a_common_prefix_does_not_keep_outputs(home: Path, store: JobStore) -> None:
    _job(store, "old", JobState.SUCCEEDED, job_dir="gs://bkt/out")
    _job(store, "stays", JobState.RUNNING, job_dir="gs://bkt/outer")
    pruned_file = _file(home, "gs://bkt/out/model.txt")
    kept_file = _file(home, "gs://bkt/outer/model.txt")

    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")], outputs=True)
    assert plan.outputs == [HomeLayout(home).storage / "bkt" / "out"]
    assert plan.kept == []
    prune(store, plan)
    assert not pruned_file.exists()
    assert kept_file.exists()


@pytest.mark.parametrize("kept_uri", ["gs://bkt/pkgs/trainer-1.0.tar.gz", "gs://bkt//pkgs/trainer-1.0.tar.gz",
                                      "gs://bkt/pkgs/./trainer-1.0.tar.gz"])
def test_a_package_a_kept_job_names_stays_however_spelled(home: Path, store: JobStore, kept_uri: str) -> None:
    package = _file(home, "gs://bkt/pkgs/trainer-1.0.tar.gz")
    _job(store, "old", JobState.FAILED, packages=["gs://bkt/pkgs/trainer-1.0.tar.gz"])
    _job(store, "stays", JobState.QUEUED, packages=[kept_uri])

    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")])
    assert plan.packages == []
    prune(store, plan)
    assert package.exists()


def test_a_package_inside_a_kept_jobs_directory_stays(home: Path, store: JobStore) -> None:
    package = _file(home, "gs://bkt/out/dist/trainer-1.0.tar.gz")
    _job(store, "old", JobState.SUCCEEDED, packages=["gs://bkt/out/dist/trainer-1.0.tar.gz"])
    _job(store, "stays", JobState.RUNNING, job_dir="gs://bkt/out/")

    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")])
    assert plan.packages == []
    assert "stays" in plan.kept[0].reason
    prune(store, plan)
    assert package.exists()


def test_outputs_holding_a_kept_jobs_package_stay(home: Path, store: JobStore) -> None:
    package = _file(home, "gs://bkt/out/dist/trainer-1.0.tar.gz")
    _job(store, "old", JobState.SUCCEEDED, job_dir="gs://bkt/out")
    _job(store, "stays", JobState.QUEUED, packages=["gs://bkt/out/dist/trainer-1.0.tar.gz"])

    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")], outputs=True)
    assert plan.outputs == []
    prune(store, plan)
    assert package.exists()


def test_an_unused_package_and_outputs_go(home: Path, store: JobStore) -> None:
    package = _file(home, "gs://bkt/pkgs/trainer-1.0.tar.gz")
    output = _file(home, "gs://bkt/out/model.txt")
    _job(store, "old", JobState.SUCCEEDED, job_dir="gs://bkt/out", packages=["gs://bkt/pkgs/trainer-1.0.tar.gz"])
    _job(store, "other", JobState.RUNNING, job_dir="gs://other/out", packages=["gs://bkt/pkgs/trainer-2.0.tar.gz"])

    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")], outputs=True)
    assert plan.packages == [package]
    assert plan.outputs == [HomeLayout(home).storage / "bkt" / "out"]
    assert prune(store, plan).deleted == 1
    assert not package.exists() and not output.exists()


def test_a_job_stored_after_the_plan_keeps_its_package_and_outputs(home: Path, store: JobStore) -> None:
    package = _file(home, "gs://bkt/pkgs/trainer-1.0.tar.gz")
    output = _file(home, "gs://bkt/out/model.txt")
    _job(store, "old", JobState.SUCCEEDED, job_dir="gs://bkt/out", packages=["gs://bkt/pkgs/trainer-1.0.tar.gz"])
    plan = plan_prune(store, home, older_than=None, named=[(PROJECT, "old")], outputs=True)
    assert plan.packages == [package] and plan.outputs == [output.parent]

    _job(store, "new", JobState.QUEUED, job_dir="gs://bkt/out/run-2/", packages=["gs://bkt/pkgs/trainer-1.0.tar.gz"])
    result = prune(store, plan)
    assert result.deleted == 1
    assert package.exists() and output.exists()
    assert sorted(kept.path for kept in result.kept) == [output.parent, package]
    assert all("job new" in kept.reason for kept in result.kept)
