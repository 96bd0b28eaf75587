"""The real command line against the local backend: submit, follow, describe, list, cancel, wait.

Trainers here are tiny Python programs (no TensorFlow): the point is the CLI's contract — exit
codes that follow the job, output on the right stream, dry-run sending nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from aiptrain._cli.main import root


def submit_args(job_id: str, package: Path, *extra: str, mode: str = "ok") -> list[str]:
    return ["jobs", "submit", "training", job_id, "--package-path", str(package), "--module-name",
            "trainer.task", "--region", "us-central1", *extra, "--", mode]


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """The installed command in a subprocess, as a user or a CI job runs it."""
    return subprocess.run([sys.executable, "-m", "aiptrain", *args], capture_output=True, text=True,
                           timeout=240, env={**os.environ})


def test_dry_run_json_has_the_stable_schema_and_sends_nothing(trainer: Path, isolated_environment: Path) -> None:
    result = CliRunner().invoke(root, [*submit_args("dry_1", trainer, "--dry-run", "--format", "json",
                                                    "--scale-tier", "custom", "--master-machine-type",
                                                    "n1-standard-4", "--worker-machine-type", "n1-standard-4",
                                                    "--worker-count", "2", "--parameter-server-machine-type",
                                                    "n1-highmem-8", "--parameter-server-count", "1",
                                                    "--runtime-version", "2.11")], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert set(plan) == {"dryRun", "backend", "project", "request", "package", "uploads", "cluster", "tfConfig",
                         "vertex", "warnings", "localRuntime"}
    assert plan["warnings"] == []
    assert plan["localRuntime"] == [f"Runtime version 2.11: runs with AIPTRAIN_LOCAL_PYTHON={sys.executable}."]
    assert plan["request"]["jobId"] == "dry_1"
    assert plan["request"]["trainingInput"]["args"] == ["ok"]
    assert plan["request"]["trainingInput"]["packageUris"] == [plan["uploads"][0]["target"]]
    assert plan["uploads"][0]["action"] == "upload"
    assert plan["uploads"][0]["target"].endswith(f"/{plan['package']['sha256']}/{plan['package']['name']}")
    assert [g["taskNames"] for g in plan["cluster"]] == [
        ["master-replica-0"], ["worker-replica-0", "worker-replica-1"], ["ps-replica-0"]]
    configs = plan["tfConfig"]
    assert set(configs) == {"master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0"}
    assert configs["worker-replica-1"]["task"] == {"type": "worker", "index": 1}
    assert set(configs["master-replica-0"]["cluster"]) == {"chief", "worker", "ps"}
    pools = plan["vertex"]["customJob"]["jobSpec"]["workerPoolSpecs"]
    assert [p.get("replicaCount") for p in pools] == ["1", "2", "1"]
    storage = isolated_environment / "storage"
    assert not storage.exists() or not any(p.is_file() for p in storage.rglob("*"))
    assert not (isolated_environment / "jobs.db").exists() or "dry_1" not in run(["jobs", "list"]).stdout


def test_dry_run_shows_the_capped_local_cluster(trainer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_LOCAL_REPLICA_CAP", "3")
    result = CliRunner().invoke(root, submit_args("dry_cap", trainer, "--dry-run", "--format", "json",
                                                  "--scale-tier", "standard-1", "--runtime-version", "2.11"),
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert sum(group["count"] for group in plan["cluster"]) == 3
    assert len(plan["tfConfig"]) == 3
    assert "AIPTRAIN_LOCAL_REPLICA_CAP=3" in plan["warnings"][0]
    assert len(plan["vertex"]["customJob"]["jobSpec"]["workerPoolSpecs"]) == 3  # Vertex keeps the real tier


def test_dry_run_text_is_readable(trainer: Path) -> None:
    result = CliRunner().invoke(root, submit_args("dry_2", trainer, "--dry-run"), catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.startswith("Dry run: nothing was uploaded and no job was created.")
    assert "master-replica-0" in result.stdout
    assert "Vertex AI translation" in result.stdout


def test_gcloudignore_shapes_the_package_and_a_bad_one_exits_2(trainer: Path, isolated_environment: Path) -> None:
    (trainer / "scratch.ipynb").write_text("{}")
    (trainer / "task_test.py").write_text("")
    (trainer.parent / ".gcloudignore").write_text("# not for the cluster\n*.ipynb\n*_test.py\n")
    result = CliRunner().invoke(root, submit_args("dry_ignore", trainer, "--dry-run", "--format", "json"),
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    files = [name.split("/", 1)[1] for name in json.loads(result.stdout)["package"]["files"]]
    assert "trainer/task.py" in files
    assert "trainer/scratch.ipynb" not in files and "trainer/task_test.py" not in files

    (trainer.parent / ".gcloudignore").write_text("*.py\n")
    refused = run(submit_args("ignore_all", trainer))
    assert refused.returncode == 2
    assert ".gcloudignore: it excludes trainer/__init__.py" in refused.stderr
    assert "ignore_all" not in run(["jobs", "list"]).stdout
    storage = isolated_environment / "storage"
    assert not storage.exists() or not any(p.is_file() for p in storage.rglob("*"))


def test_submit_async_returns_queued_job_then_wait_follows_it(trainer: Path) -> None:
    submitted = run(submit_args("async_1", trainer))
    assert submitted.returncode == 0, submitted.stderr
    assert "Job [async_1] submitted successfully." in submitted.stderr
    assert "aiptrain jobs stream-logs async_1" in submitted.stderr
    summary = yaml.safe_load(submitted.stdout)
    assert summary["jobId"] == "async_1"
    assert summary["state"] in {"QUEUED", "PREPARING", "RUNNING"}
    waited = run(["jobs", "wait", "async_1", "--timeout", "120"])
    assert waited.returncode == 0, waited.stderr
    assert yaml.safe_load(waited.stdout)["state"] == "SUCCEEDED"


def test_stream_logs_success_prints_trainer_lines_on_stderr(trainer: Path) -> None:
    result = run(submit_args("stream_ok", trainer, "--stream-logs"))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("INFO\t") and "\tmaster-replica-0\t" in line and "hello from stream_ok" in line
               for line in lines)
    assert yaml.safe_load(result.stdout)["state"] == "SUCCEEDED"


def test_stream_logs_failure_exits_10_with_the_reason(trainer: Path) -> None:
    result = run(submit_args("stream_fail", trainer, "--stream-logs", mode="fail"))
    assert result.returncode == 10
    assert "master-replica-0" in result.stderr
    assert "the trainer gave up" in result.stderr
    described = run(["jobs", "describe", "stream_fail", "--format", "json"])
    job = json.loads(described.stdout)
    assert job["state"] == "FAILED"
    assert job["errorMessage"] == "The replica master 0 exited with a non-zero status of 1. the trainer gave up"


def test_cancel_ends_in_cancelled_and_followers_exit_11(trainer: Path) -> None:
    assert run(submit_args("to_cancel", trainer, mode="sleep")).returncode == 0
    follower = subprocess.Popen([sys.executable, "-m", "aiptrain", "jobs", "stream-logs", "to_cancel"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while json.loads(run(["jobs", "describe", "to_cancel", "--format", "json"]).stdout)["state"] != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    cancelled = run(["jobs", "cancel", "to_cancel"])
    assert cancelled.returncode == 0
    assert "to_cancel" in cancelled.stderr
    assert follower.wait(timeout=60) == 11
    assert json.loads(run(["jobs", "describe", "to_cancel", "--format", "json"]).stdout)["state"] == "CANCELLED"


def test_wait_timeout_exits_12_and_ctrl_c_detaches_with_130(trainer: Path) -> None:
    assert run(submit_args("sleepy", trainer, mode="sleep")).returncode == 0
    timed_out = run(["jobs", "wait", "sleepy", "--timeout", "1"])
    assert timed_out.returncode == 12
    assert "still" in timed_out.stderr
    follower = subprocess.Popen([sys.executable, "-m", "aiptrain", "jobs", "stream-logs", "sleepy"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert follower.stdout is not None
    assert "\t" in follower.stdout.readline()  # it is following: the first log line arrived
    follower.send_signal(signal.SIGINT)
    _, stderr = follower.communicate(timeout=30)
    assert follower.returncode == 130
    assert "aiptrain jobs cancel sleepy" in stderr
    state = json.loads(run(["jobs", "describe", "sleepy", "--format", "json"]).stdout)["state"]
    assert state in {"PREPARING", "RUNNING"}  # Ctrl-C only stopped following
    assert run(["jobs", "cancel", "sleepy"]).returncode == 0


def test_list_filters_limits_and_formats(trainer: Path) -> None:
    for name in ("list_a", "list_b", "other_c"):
        assert run(submit_args(name, trainer, "--labels", f"group={name[:4]}")).returncode == 0
    for name in ("list_a", "list_b", "other_c"):
        assert run(["jobs", "wait", name, "--timeout", "120"]).returncode == 0
    table = run(["jobs", "list"])
    assert table.stdout.splitlines()[0].split() == ["JOB_ID", "STATUS", "CREATED"]
    assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == ["other_c", "list_b", "list_a"]
    filtered = json.loads(run(["jobs", "list", "--filter", "jobId:list_* AND state=SUCCEEDED",
                               "--format", "json"]).stdout)
    assert sorted(j["jobId"] for j in filtered) == ["list_a", "list_b"]
    limited = json.loads(run(["jobs", "list", "--limit", "1", "--sort-by", "jobId", "--format", "json"]).stdout)
    assert [j["jobId"] for j in limited] == ["list_a"]
    labelled = json.loads(run(["jobs", "list", "--filter", "labels.group=othe", "--format", "json"]).stdout)
    assert [j["jobId"] for j in labelled] == ["other_c"]


def test_duplicate_job_id_is_an_operational_error(trainer: Path) -> None:
    assert run(submit_args("dup_1", trainer)).returncode == 0
    again = run(submit_args("dup_1", trainer))
    assert again.returncode == 1
    assert "dup_1" in again.stderr and "exists" in again.stderr


def test_describe_of_a_missing_job_exits_1(trainer: Path) -> None:
    result = run(["jobs", "describe", "no_such_job"])
    assert result.returncode == 1
    assert "no_such_job" in result.stderr


def test_a_home_whose_path_holds_list_and_requirement_syntax_runs_jobs(
        trainer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `:` separates PYTHONPATH entries, `;` starts a pip/uv environment marker, `#` a comment: all
    # three are legitimate in a directory name.
    home = tmp_path / "my:aiptrain;home#1"
    monkeypatch.setenv("AIPTRAIN_HOME", str(home))
    result = run(submit_args("odd_home", trainer, "--stream-logs"))
    assert result.returncode == 0, result.stderr
    assert "hello from odd_home" in result.stderr
    assert yaml.safe_load(result.stdout)["state"] == "SUCCEEDED"
    assert (home / "jobs" / "local-project" / "odd_home" / "site" / "trainer" / "task.py").is_file()
