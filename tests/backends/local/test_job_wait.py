"""`aiptrain jobs wait` on the local backend reads the job store without the job model, and still
does what the engine does for every command: it fails a job whose supervisor died, and starts the
supervisor of a job whose submitter died before it could."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from aiptrain._backends.local.store import JobStore
from aiptrain._job.spec import Job
from aiptrain._job.state import JobState

PROJECT = "local-project"
AIPTRAIN = str(Path(sys.executable).parent / "aiptrain")
PROBE = """
import sys
from aiptrain._cli.main import root
code = 0
try:
    root.main(args={args!r}, prog_name="aiptrain")
except SystemExit as exit:
    code = exit.code
print("\\n".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def stored_job(home: Path, job_id: str, *, package: str = "gs://nowhere/trainer-0.1.tar.gz") -> int:
    job = Job.model_validate({"jobId": job_id, "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "pythonModule": "trainer.task", "packageUris": [package]}})
    store = JobStore(home)
    try:
        return store.insert_job(PROJECT, job, f"token-{job_id}").key
    finally:
        store.close()


def wait(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AIPTRAIN, "jobs", "wait", *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ), check=False)


def test_waiting_for_a_finished_job_loads_no_job_model(isolated_environment: Path) -> None:
    key = stored_job(isolated_environment, "done")
    store = JobStore(isolated_environment)
    store.set_supervisor(key, os.getpid(), None)
    store.transition(key, JobState.SUCCEEDED)
    store.close()
    probe = subprocess.run([sys.executable, "-c", PROBE.format(args=["jobs", "wait", "done"])],
                           capture_output=True, text=True, env=dict(os.environ), check=False, timeout=120)
    assert probe.returncode == 0, probe.stderr
    assert yaml.safe_load(probe.stdout)["state"] == "SUCCEEDED"
    loaded = set(probe.stderr.split())
    assert "aiptrain._backends.local.job_wait" in loaded  # the probe really waited locally
    assert sorted(name for name in loaded if name.startswith(("pydantic", "aiptrain._job.spec"))) == []


def test_a_job_whose_supervisor_died_is_failed_by_wait(isolated_environment: Path) -> None:
    key = stored_job(isolated_environment, "orphan")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store = JobStore(isolated_environment)
    store.set_supervisor(key, dead.pid, None)
    store.close()
    waited = wait("orphan", "--timeout", "60")
    assert waited.returncode == 10, waited.stderr
    assert f"The local supervisor of this job (pid {dead.pid}) died unexpectedly" in waited.stderr
    assert yaml.safe_load(waited.stdout)["state"] == "FAILED"


def test_wait_starts_a_job_its_submitter_never_started(isolated_environment: Path) -> None:
    # Stored, never started: what a submitter killed between the two steps leaves. Its package
    # does not exist, so once started its supervisor fails it in PREPARING.
    stored_job(isolated_environment, "unlaunched")
    waited = wait("unlaunched", "--timeout", "60")
    assert waited.returncode == 10, waited.stderr
    store = JobStore(isolated_environment)
    record = store.get(PROJECT, "unlaunched")
    messages = [entry.message for entry in store.read_logs(record.key)]
    store.close()
    assert record.supervisor_pid is not None
    assert any("A run slot is free: the job's supervisor starts now." in message for message in messages)
    assert "Job PREPARING." in messages
