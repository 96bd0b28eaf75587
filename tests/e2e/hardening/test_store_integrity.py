"""A damaged job store is refused with the recovery commands and never written into; one left by a
killed process is checked first and used when it is sound."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aiptrain._backends.local.store import JobStore, PendingLine
from aiptrain._backends.local.store_integrity import needs_check
from aiptrain._job.spec import Job
from aiptrain._job.state import JobState
from aiptrain._replicas.clock import utc_now

PROJECT = "integrity-project"


def _filled_store(home: Path) -> None:
    store = JobStore(home)
    record = store.insert_job(PROJECT, Job.model_validate({"jobId": "kept"}), "token")
    store.append_logs(record.key, [PendingLine(utc_now(), "INFO", "master-replica-0", f"line {index} " + "x" * 200)
                                   for index in range(3000)])
    store.close()


def _damage(database: Path) -> None:
    """Random bytes over pages in the middle of the file, where the tables' rows are."""
    size = database.stat().st_size
    assert size > 16 * 4096, size
    with open(database, "r+b") as stream:
        stream.seek(size // 2 // 4096 * 4096)
        stream.write(os.urandom(8 * 4096))


def _aiptrain(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "AIPTRAIN_HOME": str(home)})


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _killed_while_writing(home: Path) -> None:
    """A process that wrote a job and was killed before closing: its write-ahead log stays."""
    script = textwrap.dedent("""
        import os, sys
        from pathlib import Path
        from aiptrain._backends.local.store import JobStore
        from aiptrain._job.spec import Job
        store = JobStore(Path(sys.argv[1]))
        store.insert_job("integrity-project", Job.model_validate({"jobId": "late"}), "token2")
        print("written", flush=True)
        sys.stdin.read()
    """)
    writer = subprocess.Popen([sys.executable, "-c", script, str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert (home / "jobs.db-wal").stat().st_size > 0


@pytest.mark.parametrize("command", [("jobs", "list", "--project", PROJECT),
                                     ("jobs", "describe", "kept", "--project", PROJECT)],
                         ids=["list", "describe"])
def test_a_store_damaged_after_a_clean_close_is_refused_untouched(tmp_path: Path, command: tuple[str, ...]) -> None:
    home = tmp_path / "home"
    _filled_store(home)
    _damage(home / "jobs.db")
    before = _digest(home / "jobs.db")
    result = _aiptrain(home, *command)
    assert result.returncode == 1, result.stderr
    assert "is damaged" in result.stderr and "will not write into it" in result.stderr
    assert ".recover" in result.stderr and "cp " in result.stderr
    assert "Traceback" not in result.stderr
    assert _digest(home / "jobs.db") == before


def test_a_submit_into_a_damaged_store_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _filled_store(home)
    _damage(home / "jobs.db")
    before = _digest(home / "jobs.db")
    package = tmp_path / "project" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hi')\n")
    result = _aiptrain(home, "jobs", "submit", "training", "into_damage", "--project", PROJECT, "--package-path",
                       str(package), "--module-name", "trainer.task", "--region", "us-central1",
                       "--staging-bucket", "gs://integrity-bucket")
    assert result.returncode == 1, result.stderr
    assert "is damaged" in result.stderr
    assert _digest(home / "jobs.db") == before


def test_a_sound_store_left_by_a_killed_process_is_used(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _filled_store(home)
    _killed_while_writing(home)
    result = _aiptrain(home, "jobs", "list", "--project", PROJECT, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert sorted(job["jobId"] for job in json.loads(result.stdout)) == ["kept", "late"]


def test_a_damaged_store_left_by_a_killed_process_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _filled_store(home)
    _killed_while_writing(home)
    _damage(home / "jobs.db")
    result = _aiptrain(home, "jobs", "list", "--project", PROJECT)
    assert result.returncode == 1, result.stderr
    assert "is damaged" in result.stderr


def _finished_job_store(home: Path) -> None:
    store = JobStore(home)
    record = store.insert_job(PROJECT, Job.model_validate({"jobId": "kept"}), "token")
    store.transition(record.key, JobState.SUCCEEDED)
    store.close()


@pytest.mark.parametrize("command", [("jobs", "list", "--project", PROJECT),
                                     ("jobs", "describe", "kept", "--project", PROJECT),
                                     ("jobs", "update", "kept", "--project", PROJECT, "--update-labels", "team=a"),
                                     ("jobs", "cancel", "kept", "--project", PROJECT)],
                         ids=["list", "describe", "update", "cancel"])
def test_every_command_leaves_the_store_clean_for_the_next(tmp_path: Path, command: tuple[str, ...]) -> None:
    """A command that wrote into the store stamps its clean close, so the next one skips the check."""
    home = tmp_path / "home"
    _finished_job_store(home)
    result = _aiptrain(home, *command)
    assert "Traceback" not in result.stderr, result.stderr
    assert not (home / "jobs.db-wal").exists()
    assert not needs_check(home / "jobs.db"), (home / "jobs.db.clean").read_text()


def test_a_store_garbage_collected_without_close_is_left_clean(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _finished_job_store(home)
    script = textwrap.dedent("""
        import gc, sys
        from pathlib import Path
        from aiptrain._backends.local.store import JobStore
        from aiptrain._job.spec import Job
        store = JobStore(Path(sys.argv[1]))
        store.insert_job("integrity-project", Job.model_validate({"jobId": "dropped"}), "token2")
        del store
        gc.collect()
    """)
    subprocess.run([sys.executable, "-c", script, str(home)], check=True, timeout=60)
    assert not needs_check(home / "jobs.db")
