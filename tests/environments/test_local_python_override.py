"""AIPTRAIN_LOCAL_PYTHON still overrides the runtime environment, and an interpreter that
cannot install the trainer package is refused with a clear message before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import describe, submit

pytestmark = pytest.mark.slow


def test_an_interpreter_without_pip_fails_the_job_in_preparing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              engine: object) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    monkeypatch.setenv("AIPTRAIN_LOCAL_PYTHON", str(bare / "bin" / "python"))
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(tmp_path / "envs"))
    result = submit("nopip", "compat_v1", "--runtime-version", "2.11", "--job-dir", "gs://envtests/nopip")
    assert result.returncode == 10, result.stderr
    message = describe("nopip")["errorMessage"]
    assert message.startswith(f"AIPTRAIN_LOCAL_PYTHON={bare}/bin/python cannot install the trainer package: "
                              "it has no pip")
    assert "unset AIPTRAIN_LOCAL_PYTHON" in message
    assert "Job RUNNING." not in result.stdout + result.stderr
    assert not (tmp_path / "envs").exists()  # no runtime environment was built


def test_the_override_runs_the_trainer_with_that_interpreter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             engine: object, home: Path) -> None:
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(tmp_path / "envs"))  # AIPTRAIN_LOCAL_PYTHON: the test's Python
    result = submit("override", "compat_v1", "--runtime-version", "1.15", "--job-dir", "gs://envtests/override")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    logs = result.stdout + result.stderr
    assert f"Runtime version 1.15: running with AIPTRAIN_LOCAL_PYTHON={sys.executable}" in logs
    assert f"Starting master-replica-0: {sys.executable} -m trainer.task" in logs
    assert not (tmp_path / "envs").exists()
    import tensorflow as tf

    written = (home / "storage" / "envtests" / "override" / "sum.txt").read_text()
    assert written == f"42 {tf.__version__}\n"
