"""Ctrl-C while `jobs submit training` creates the job: the job is named, and it runs.

The interrupt is sent the moment the submitter holds the job's launch lock (the file appears under
`$AIPTRAIN_HOME/launching/`), that is after the upload, between storing the job and starting its
supervisor: where a plain KeyboardInterrupt used to leave a QUEUED job that nobody ran, behind a
bare "Interrupted.".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiptrain._backends.local.store import JobStore
from tests.fixtures.engine import wait_until

PROJECT = "ctrl-c-project"


def _sleeping_trainer(root: Path) -> Path:
    package = root / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(300)\n")
    return package


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_during_the_create_names_the_job_and_leaves_it_running(tmp_path: Path, attempt: int) -> None:
    home = tmp_path / "home"
    job_id = f"ctrl_c_{attempt}"
    env = {**os.environ, "AIPTRAIN_HOME": str(home), "NO_COLOR": "1"}
    argv = [sys.executable, "-m", "aiptrain", "jobs", "submit", "training", job_id, "--project", PROJECT,
            "--package-path", str(_sleeping_trainer(tmp_path)), "--module-name", "trainer.task",
            "--region", "us-central1", "--staging-bucket", "gs://ctrl-c-bucket"]
    submitter = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    launching = home / "launching"
    deadline = time.monotonic() + 120
    while not (launching.is_dir() and any(launching.iterdir())):
        assert submitter.poll() is None, submitter.communicate()
        assert time.monotonic() < deadline, "the submitter never started creating the job"
        time.sleep(0.0005)
    submitter.send_signal(signal.SIGINT)
    _out, err = submitter.communicate(timeout=60)
    store = JobStore(home)
    try:
        assert submitter.returncode == 130, err
        for verb in ("describe", "stream-logs", "cancel"):
            assert f"aiptrain jobs {verb} {job_id} --backend local --project {PROJECT}" in err
        record = store.get(PROJECT, job_id)
        assert record.supervisor_pid is not None  # started by the submitter, not by a later sweep
        assert _alive(record.supervisor_pid)
        wait_until(lambda: store.get(PROJECT, job_id).state.value == "RUNNING", 120, "the job to run")
    finally:
        subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "cancel", job_id, "--project", PROJECT],
                       env=env, capture_output=True, timeout=120)
        wait_until(lambda: not store.active_jobs(), 60, "the job to end")
