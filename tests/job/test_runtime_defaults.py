"""The runtime a job runs when it names none, said once; the newest runtime for `local train`."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import ReplicaConfig, TrainingInput
from aiptrain._job.validate import runtime_warnings
from tests.fixtures.tiny_trainer import trainer

__all__ = ["trainer"]  # the fixture


def _aiptrain(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_a_job_without_runtime_version_is_told_once_which_runtime_it_runs() -> None:
    catalog = load_catalog()
    (line,) = runtime_warnings(TrainingInput(python_module="trainer.task"), catalog)
    assert line.startswith(f"no --runtime-version given: the job runs runtime {catalog.default_runtime_version},")
    assert "2020-01-13" in line and "--runtime-version" in line
    # Named, a supported runtime says nothing; a retired one says it was retired; a container brings its own.
    assert runtime_warnings(TrainingInput(runtime_version="1.15"), catalog) == []
    assert runtime_warnings(TrainingInput(runtime_version="1.10"), catalog)[0].startswith(
        "runtime version 1.10 was retired")
    container = TrainingInput(master_config=ReplicaConfig(image_uri="example/trainer:1"))
    assert runtime_warnings(container, catalog) == []


def test_dry_run_without_runtime_version_shows_the_default_and_its_one_warning(
        tmp_path: Path, trainer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIPTRAIN_LOCAL_PYTHON", raising=False)
    package = trainer
    done = _aiptrain("jobs", "submit", "training", "no_runtime", "--package-path", str(package),
                     "--module-name", "trainer.task", "--region", "us-central1", "--dry-run", "--format", "json",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert [w for w in plan["warnings"] if "runtime" in w] == [
        w for w in plan["warnings"] if w.startswith("no --runtime-version given: the job runs runtime 1.0,")]
    assert len([w for w in plan["warnings"] if "runtime" in w]) == 1
    assert plan["localRuntime"][0].startswith("Runtime version 1.0 (the service's default when none is given)")


def test_a_submitted_job_without_runtime_version_warns_on_stderr(tmp_path: Path, trainer: Path) -> None:
    package = trainer
    done = _aiptrain("jobs", "submit", "training", "no_runtime_real", "--package-path", str(package),
                     "--module-name", "trainer.task", "--region", "us-central1", "--stream-logs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: no --runtime-version given")]
    assert len(warned) == 1
    assert "the job runs runtime 1.0" in warned[0]


def test_local_train_default_is_the_newest_runtime_by_version_not_by_text() -> None:
    catalog = load_catalog()
    numeric = max(catalog.runtimes, key=lambda v: [int(part) for part in v.split(".")])
    assert catalog.newest_runtime_version == numeric
    # "2.8" sorts after "2.11" as text; the newest is 2.11 all the same, wherever it is listed.
    shuffled = dataclasses.replace(catalog, runtimes={v: catalog.runtimes[v] for v in ("2.11", "2.8", "1.15")})
    assert shuffled.newest_runtime_version == "2.11"
