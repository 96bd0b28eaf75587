"""`import aiptrain` as a notebook or an Airflow task uses it: real jobs on the local backend and
through `aiptrain local serve` (the mlv1 backend), errors of the AiptrainError family."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import aiptrain
from aiptrain._job.logs import LogEntry
from aiptrain._job.spec import JobState
from tests.fixtures.emulator import REPO, Emulator


def test_submit_wait_logs_list_get_on_the_local_backend(trainer: Path) -> None:
    created = aiptrain.submit("api_ok", package_path=trainer, module_name="trainer.task", args=["ok"],
                              region="us-central1",
                              labels={"team": "api"})
    assert created.job_id == "api_ok"
    assert created.state in (JobState.QUEUED, JobState.PREPARING, JobState.RUNNING)
    streamed: list[LogEntry] = []
    ended = aiptrain.wait("api_ok", timeout=120, on_entry=streamed.append)
    assert ended.state == JobState.SUCCEEDED
    messages = [entry.message for entry in aiptrain.logs("api_ok")]
    assert any(message.startswith("hello from") for message in messages)
    assert "bye" in messages
    assert "bye" in [entry.message for entry in streamed]
    assert aiptrain.get("api_ok").labels == {"team": "api"}
    assert [job.job_id for job in aiptrain.list(filter="labels.team=api")] == ["api_ok"]
    assert aiptrain.list(filter="labels.team=other") == []


def test_a_job_object_is_submitted_with_flags_on_top(trainer: Path) -> None:
    client = aiptrain.Client(project="api-project")
    client.submit("api_first", package_path=trainer, module_name="trainer.task", args=["ok"], region="us-central1")
    client.wait("api_first", timeout=120)
    first = client.get("api_first")
    again = client.submit("api_again", job=first, args=["fail"])
    assert again.training_input is not None and again.training_input.args == ["fail"]
    failed = client.wait("api_again", timeout=120)
    assert failed.state == JobState.FAILED
    assert "the trainer gave up" in (failed.error_message or "")


def test_cancel_and_a_wait_that_times_out(trainer: Path) -> None:
    aiptrain.submit("api_sleep", package_path=trainer, module_name="trainer.task", args=["sleep"], region="us-central1")
    with pytest.raises(aiptrain.WaitTimedOut) as timed_out:
        aiptrain.wait("api_sleep", timeout=0.5)
    assert timed_out.value.exit_code == 12
    aiptrain.cancel("api_sleep")
    assert aiptrain.wait("api_sleep", timeout=60).state == JobState.CANCELLED
    with pytest.raises(aiptrain.JobAlreadyFinished):
        aiptrain.cancel("api_sleep")


def test_errors_are_the_aiptrain_family(trainer: Path) -> None:
    with pytest.raises(aiptrain.ValidationFailed) as refused:
        aiptrain.submit("api_bad", package_path=trainer, module_name="trainer.task", worker_count=-1,
                        region="us-central1",
                        scale_tier="CUSTOM", master_machine_type="n1-standard-4")
    assert any("worker" in problem.path.lower() for problem in refused.value.problems)
    assert aiptrain.list(filter="jobId=api_bad") == []  # nothing created
    with pytest.raises(aiptrain.UsageError, match="master_machin"):
        aiptrain.submit("api_typo", package_path=trainer, module_name="trainer.task", master_machin="x")
    with pytest.raises(aiptrain.NotFound):
        aiptrain.get("no_such_job")
    with pytest.raises(aiptrain.UsageError, match="needs a project"):
        aiptrain.get("x", backend="mlv1")
    with pytest.raises(aiptrain.AiptrainError):
        aiptrain.Client(backend="nowhere")


def test_a_dry_run_is_the_commands_and_sends_nothing(trainer: Path) -> None:
    arguments: dict[str, Any] = {"package_path": trainer, "module_name": "trainer.task", "region": "us-central1",
                                 "args": ["ok"], "scale_tier": "CUSTOM", "master_machine_type": "n1-standard-4",
                                 "worker_count": 2, "worker_machine_type": "n1-standard-4", "labels": {"team": "api"}}
    document = aiptrain.dry_run("api_dry", **arguments)
    assert document["dryRun"] is True and document["backend"] == "local"
    request = document["request"]
    assert request["jobId"] == "api_dry" and request["labels"] == {"team": "api"}
    assert request["trainingInput"]["args"] == ["ok"] and request["trainingInput"]["workerCount"] == "2"
    assert [(group["taskType"], group["count"]) for group in document["cluster"]] == [("master", 1), ("worker", 2)]
    assert sorted(document["tfConfig"]) == ["master-replica-0", "worker-replica-0", "worker-replica-1"]
    assert document["package"]["name"].startswith("trainer-") and document["uploads"]
    # Nothing created, nothing staged: the job does not exist and the store holds no package.
    assert aiptrain.list(filter="jobId=api_dry") == []
    storage = Path(os.environ["AIPTRAIN_HOME"]) / "storage"
    assert not storage.exists() or not any(path.is_file() for path in storage.rglob("*"))

    # The command line prints the same document (its package build is now the cached one).
    printed = subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "api_dry",
                              "--package-path", str(trainer), "--module-name", "trainer.task", "--region",
                              "us-central1", "--scale-tier", "CUSTOM", "--master-machine-type", "n1-standard-4",
                              "--worker-count", "2", "--worker-machine-type", "n1-standard-4", "--labels",
                              "team=api", "--dry-run", "--format", "json", "--", "ok"],
                             capture_output=True, text=True, timeout=120, env=os.environ)
    assert printed.returncode == 0, printed.stderr
    by_command = json.loads(printed.stdout)
    for key in ("request", "cluster", "tfConfig", "vertex", "uploads"):
        assert by_command[key] == document[key], key

    with pytest.raises(aiptrain.ValidationFailed) as refused:
        aiptrain.dry_run("api_dry_bad", **{**arguments, "worker_count": -1})
    assert any("worker" in problem.path.lower() for problem in refused.value.problems)
    with pytest.raises(aiptrain.UsageError, match="dry_run") as misused:
        aiptrain.submit("api_dry", dry_run=True, **arguments)
    assert "aiptrain.dry_run" in (misused.value.hint or "")
    assert aiptrain.list() == []


def test_through_the_emulator_with_the_mlv1_backend(emulator: Emulator, trainer_sdist: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_API_TOKEN", emulator.token or "")  # its token file is in the server's home
    uri = emulator.stage(trainer_sdist, "gs://api-bucket/packages/trainer.tar.gz")
    client = aiptrain.Client(backend="mlv1", project="api-project", api_endpoint=emulator.url)
    client.submit("api_remote", packages=[uri], module_name="trainer.task", region="us-central1",
                  runtime_version="2.11", args=["--lines", "2"])
    assert client.wait("api_remote", timeout=120).state == JobState.SUCCEEDED
    assert "line 1 from chief-0" in [entry.message for entry in client.logs("api_remote")]
    assert [job.job_id for job in client.list()] == ["api_remote"]
    with pytest.raises(aiptrain.JobAlreadyFinished):  # the service's FAILED_PRECONDITION, as the local engine says it
        client.cancel("api_remote")


def test_import_aiptrain_stays_light() -> None:
    # Namespace packages' .pth files may load `google` itself at start-up: count only what the import adds.
    code = ("import sys\nbefore = set(sys.modules)\nimport aiptrain\n"
            "heavy = [m for m in set(sys.modules) - before\n"
            "         if m.split('.')[0] in ('google', 'pydantic', 'click', 'yaml', 'googleapiclient')]\n"
            "print(sorted(heavy))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_through_the_emulator_with_the_vertex_backend(emulator: Emulator, trainer_sdist: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The same calls on the vertex backend: a CustomJob each, read back as ml v1 jobs."""
    monkeypatch.setenv("AIPTRAIN_API_TOKEN", emulator.token or "")
    uri = emulator.stage(trainer_sdist, "gs://api-bucket/packages/vertex-trainer.tar.gz")
    client = aiptrain.Client(backend="vertex", project="api-vertex", region="us-central1",
                             api_endpoint=emulator.url)
    created = client.submit("api_vertex", packages=[uri], module_name="trainer.task", runtime_version="2.11",
                            args=["--lines", "2"], labels={"via": "vertex"})
    assert created.job_id == "api_vertex"
    streamed: list[LogEntry] = []
    ended = client.wait("api_vertex", timeout=120, on_entry=streamed.append)
    assert ended.state == JobState.SUCCEEDED, ended.error_message
    assert "line 1 from chief-0" in [entry.message for entry in client.logs("api_vertex")]
    assert "line 1 from chief-0" in [entry.message for entry in streamed]
    assert client.get("api_vertex").labels == {"via": "vertex"}
    # The job really is a Vertex AI CustomJob of the emulator, not an ml v1 job.
    assert emulator.engine().vertex_job_ids("api-vertex")

    client.submit("api_vertex_sleep", packages=[uri], module_name="trainer.task", runtime_version="2.11",
                  args=["--sleep", "120"])
    with pytest.raises(aiptrain.WaitTimedOut):
        client.wait("api_vertex_sleep", timeout=0.5)
    client.cancel("api_vertex_sleep")
    assert client.wait("api_vertex_sleep", timeout=60).state == JobState.CANCELLED
    with pytest.raises(aiptrain.JobAlreadyFinished):
        client.cancel("api_vertex_sleep")
    assert sorted(str(job.job_id) for job in client.list()) == ["api_vertex", "api_vertex_sleep"]
    assert [job.job_id for job in client.list(filter="labels.via=vertex")] == ["api_vertex"]
    with pytest.raises(aiptrain.NotFound):
        client.get("api_vertex_nobody")


def test_the_vertex_backend_warns_when_the_python_changes(emulator: Emulator, trainer_sdist: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Runtime 1.15 ran Python 2.7 by default; Vertex AI's 1.15 images run Python 3.7, and `submit`
    says so as an AiptrainWarning (the job is still created)."""
    monkeypatch.setenv("AIPTRAIN_API_TOKEN", emulator.token or "")
    uri = emulator.stage(trainer_sdist, "gs://api-bucket/packages/vertex-trainer.tar.gz")
    client = aiptrain.Client(backend="vertex", project="api-vertex-py", region="us-central1",
                             api_endpoint=emulator.url)
    with pytest.warns(aiptrain.AiptrainWarning, match="runs Python 3.7, not 2.7"):
        client.submit("api_vertex_py27", packages=[uri], module_name="trainer.task", runtime_version="1.15",
                      args=["--sleep", "120"])
    client.cancel("api_vertex_py27")
    assert client.wait("api_vertex_py27", timeout=60).state == JobState.CANCELLED
