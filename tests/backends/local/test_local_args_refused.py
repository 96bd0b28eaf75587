"""The local backend refuses trainer arguments that name a gs:// location outside its store.

The engine maps gs:// arguments to local paths when a job starts; a `..` there used to create
the job and then fail it with an internal supervisor error. The emulator's counterpart (400 on
`job.training_input.args[N]`) is in test_emulator_plain_client.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.emulator import REPO, make_trainer_project


def test_submit_with_a_dotdot_argument_exits_2_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    package = make_trainer_project(tmp_path / "project")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPTRAIN_")}
    env.update({"AIPTRAIN_HOME": str(home), "NO_COLOR": "1"})
    result = subprocess.run(
        [sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "escapes", "--package-path",
         str(package), "--module-name", "trainer.task", "--region", "us-central1",
         "--", "--lines", "1", "--x", "gs://ci-bucket/../../etc", "--y=gs://ci-bucket/ok/../../x"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "trainingInput.args[3]: 'gs://ci-bucket/../../etc' cannot be mapped" in result.stderr
    assert "trainingInput.args[4]: 'gs://ci-bucket/ok/../../x' cannot be mapped" in result.stderr
    assert "Internal error" not in result.stderr
    # Refused before anything was built, staged or submitted: the home holds no job and no package.
    assert not home.exists() or not any(home.rglob("*.tar.gz"))
    listed = subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "list", "--format", "json"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and listed.stdout.strip() == "[]", listed.stdout


def test_a_bad_install_stall_setting_exits_2_naming_it_and_creates_nothing(tmp_path: Path) -> None:
    package = make_trainer_project(tmp_path / "project")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPTRAIN_")}
    env.update({"AIPTRAIN_HOME": str(home), "NO_COLOR": "1", "AIPTRAIN_INSTALL_STALL_SECONDS": "a while"})
    result = subprocess.run(
        [sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "stall_setting", "--package-path",
         str(package), "--module-name", "trainer.task", "--region", "us-central1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "AIPTRAIN_INSTALL_STALL_SECONDS='a while' is not a number of seconds" in result.stderr
    assert not home.exists() or not any(home.rglob("*.tar.gz"))


def test_a_bad_python2_setting_exits_2_naming_it_and_the_values(tmp_path: Path) -> None:
    package = make_trainer_project(tmp_path / "project")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIPTRAIN_")}
    env.update({"AIPTRAIN_HOME": str(home), "NO_COLOR": "1", "AIPTRAIN_PYTHON2_MISSING": "python2"})
    result = subprocess.run(
        [sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "py2_setting", "--package-path",
         str(package), "--module-name", "trainer.task", "--region", "us-central1", "--runtime-version", "2.11",
         "--python-version", "3.7"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "AIPTRAIN_PYTHON2_MISSING='python2' is neither `fail` nor `python3`" in result.stderr
    assert "AIPTRAIN_PYTHON2_MISSING=python3 (it runs on the nearest Python 3)" in result.stderr
    assert not home.exists() or not any(home.rglob("*.tar.gz"))
