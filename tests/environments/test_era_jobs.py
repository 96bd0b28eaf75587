"""Trainers of 2019-2021 meet their runtime as the service gave it in its day: their requirements
resolved as of the runtime's day with their pins honoured over the image's (TensorFlow too), the
image's own package versions, the runtime's pip for what uv refuses, and the VM's default
credentials for the runtime's own google-cloud-storage. Real jobs on runtime 1.15 and 2.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import aiptrain, describe, job_log, submit

pytestmark = [pytest.mark.slow, pytest.mark.runtime_envs]
PROJECT_NUMBER = "217212046978"  # of `local-project` (aiptrain._job.project_id.project_number_for)


def _report(home: Path, *parts: str) -> dict[str, Any]:
    data = json.loads(home.joinpath("storage", "envtests", *parts).read_text())
    assert isinstance(data, dict)
    return data


def _logs(result: Any) -> str:
    return str(result.stdout) + str(result.stderr)


def _succeeded(job_id: str, trainer: str, runtime: str, home: Path) -> tuple[str, dict[str, Any]]:
    """Run the trainer's job on `runtime` (Python 3.7) to success: its log, and the report it wrote."""
    result = submit(job_id, trainer, "--runtime-version", runtime, "--python-version", "3.7",
                    "--job-dir", f"gs://envtests/{job_id}")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    return logs, _report(home, job_id, "report.json")


def test_a_tensorflow_patch_pin_with_open_requirements_trains_on_the_packages_of_its_day(
        runtime_envs: Path, home: Path) -> None:
    logs, report = _succeeded("era115", "era_1_15", "1.15", home)
    # The pin runs; the open requirements are what pip found on 2020-12-19 (today's tensorflow-hub
    # needs TensorFlow 2, and protobuf 4 would not even import with TensorFlow 1.15).
    assert report["tensorflow"] == "1.15.2" and report["protobuf"] == "3.14.0", report
    assert (report["hub"], report["tabulate"]) == ("0.10.0", "0.8.7"), report
    assert report["losses"][-1] < report["losses"][0]  # it trained
    # The image's own packages (VX tf-cpu.1-15), not the versions recalled before.
    assert {name: report[name] for name in ("numpy", "scipy", "pandas", "sklearn", "xgboost", "storage")} == {
        "numpy": "1.16.5", "scipy": "1.2.2", "pandas": "0.24.2", "sklearn": "0.20.4", "xgboost": "0.82",
        "storage": "1.19.1"}
    # google-cloud-storage 1.19.1 with no arguments: the VM's credentials, project and service account.
    assert report["credentials"] == "google.auth.compute_engine.credentials" and report["project"] == "local-project"
    assert report["email"] == f"service-{PROJECT_NUMBER}@cloud-ml.google.com.iam.gserviceaccount.com"
    assert json.loads(home.joinpath("storage", "envtests", "era115", "listed.json").read_text()) == [
        "era115/report.json", "era115/tf-gfile.txt"]
    assert "Trainer packages resolve as of 2020-12-19 (runtime 1.15's day: 12 months after its release on " \
           "2019-12-19)" in logs
    assert "The trainer's requirements replace the runtime's tensorflow 1.15.0 (now 1.15.2)" in logs
    described = aiptrain("jobs", "describe", "era115")
    assert "Ran in:" in described.stderr and "Trainer packages resolve as of 2020-12-19" in described.stderr


def test_a_tensorflow_1_pin_on_runtime_2_1_runs_tensorflow_1_and_the_image_of_2_1(
        runtime_envs: Path, home: Path) -> None:
    logs, report = _succeeded("era21", "era_2_1", "2.1", home)
    assert (report["tensorflow"], report["contrib"], report["sum"]) == ("1.15.0", True, 42.0), report
    assert {name: report[name] for name in ("numpy", "pandas", "sklearn", "storage")} == {
        "numpy": "1.18.0", "pandas": "0.25.3", "sklearn": "0.22.1", "storage": "1.23.0"}
    assert report["credentials"] == "google.auth.compute_engine.credentials" and report["project"] == "local-project"
    assert 'listed ["era21/report.json"]' in logs
    assert "replace the runtime's" in logs and "tensorflow 2.1.0 (now 1.15.0)" in logs


def test_what_uv_refuses_installs_with_the_runtimes_pip_and_a_later_pin_moves_the_day(
        runtime_envs: Path, home: Path) -> None:
    result = submit("legacy21", "legacy_metadata", "--runtime-version", "2.1", "--python-version", "3.7")
    logs = _logs(result)
    assert result.returncode == 0, logs[-4000:]
    assert "networkdays 1.0.2 from " in logs and "/site/networkdays/" in logs
    fallback = [line for line in logs.splitlines() if "installing it with the runtime's own pip" in line]
    assert len(fallback) == 1 and "from the package index of 2021-03-09" in fallback[0], fallback

    # Runtime 1.15's day (2020-12-19) came before the release (2020-12-28): the service installed the
    # pin when the job was submitted, so the job runs as of the pin's day, and says so.
    later = submit("legacy115", "legacy_metadata", "--runtime-version", "1.15", "--python-version", "3.7")
    assert later.returncode == 0, _logs(later)[-4000:]
    moved = ("Trainer packages resolve as of 2020-12-28: the trainer pins python-networkdays==1.0.2, published that "
             "day, after runtime 1.15's day (2020-12-19).")
    assert job_log("legacy115").count(moved) == 1
    described = aiptrain("jobs", "describe", "legacy115")
    assert "Ran in:" in described.stderr and moved in described.stderr.replace("\n    ", " ")
    # A day the job names wins over its pins: before the release, the pin has no file of that day.
    named = submit("legacy115b", "legacy_metadata", "--runtime-version", "1.15", "--python-version", "3.7",
                   "--labels", "aiptrain-resolve-as-of=2020-12-20")
    assert named.returncode == 10, _logs(named)[-4000:]
    assert "Trainer packages resolve as of 2020-12-20 (the job's label aiptrain-resolve-as-of)" in job_log("legacy115b")
    assert describe("legacy115b")["errorMessage"] == (
        "Installing the trainer package legacy_metadata_trainer-0.1.tar.gz failed: its requirement "
        "python-networkdays==1.0.2 has no file on the package index published by 2020-12-20. Hint: check the "
        "version, or run the job as of a later day (--labels aiptrain-resolve-as-of=YYYY-MM-DD, or "
        "AIPTRAIN_RESOLVE_AS_OF).")
