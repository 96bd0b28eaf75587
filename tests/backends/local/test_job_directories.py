"""A job's directory under $AIPTRAIN_HOME/jobs is its own: a new job never inherits the files of an
older one that had the same ID (a store moved away to start empty, a pruned job)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from aiptrain._backends.local.layout import path_list_entry

TASK = """
import importlib.util
print("helper importable:", importlib.util.find_spec("trainer.helper") is not None, flush=True)
"""


def _submit_and_follow(job_id: str, package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "submit", "training", job_id, "--package-path",
                           str(package), "--module-name", "trainer.task", "--region", "us-central1", "--stream-logs"],
                          capture_output=True, text=True, timeout=240, env={**os.environ})


def test_a_reused_job_id_after_starting_empty_runs_only_its_own_package(trainer: Path, home: Path) -> None:
    (trainer / "task.py").write_text(TASK)
    (trainer / "helper.py").write_text("VALUE = 1\n")
    first = _submit_and_follow("reused", trainer)
    assert first.returncode == 0, first.stderr
    assert "helper importable: True" in first.stdout + first.stderr

    # The documented way to start empty: move the store away.
    for name in ("jobs.db", "jobs.db-wal", "jobs.db-shm", "jobs.db.clean"):
        if (home / name).exists():
            (home / name).rename(home / f"old-{name}")
    (trainer / "helper.py").unlink()
    second = _submit_and_follow("reused", trainer)
    assert second.returncode == 0, second.stderr
    assert "helper importable: False" in second.stdout + second.stderr


TEMP_TASK = """
import tempfile
with tempfile.NamedTemporaryFile(prefix="left-", delete=False) as left:
    print("left:", left.name, flush=True)
"""


def test_what_a_job_s_replicas_leave_in_their_temporary_directory_goes_with_the_job(trainer: Path,
                                                                                   home: Path) -> None:
    # As the service's VMs took their /tmp with them: TensorFlow's autograph files of a replica
    # killed at the job's end, a trainer's own leftovers.
    (trainer / "task.py").write_text(TEMP_TASK)
    done = _submit_and_follow("temp_left", trainer)
    assert done.returncode == 0, done.stderr
    left = Path(next(line for line in (done.stdout + done.stderr).splitlines() if "left: " in line)
                .split("left: ", 1)[1])
    assert left.parent.name.startswith("aiptrain-job-")
    assert not left.exists() and not left.parent.exists()


def test_the_alias_of_a_job_directory_that_is_gone_is_forgotten_once_stale(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # An AIPTRAIN_HOME holding `:` reaches PYTHONPATH through an alias (a symlink) per job directory.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "system-tmp"))
    (tmp_path / "system-tmp").mkdir()
    home = tmp_path / "my:home"
    gone, later = home / "gone" / "site", home / "later" / "site"
    gone.mkdir(parents=True)
    stale = path_list_entry(gone)
    assert stale.is_symlink() and stale.resolve() == gone
    shutil.rmtree(gone.parent)  # the job was pruned
    an_hour_ago = time.time() - 3700
    os.utime(stale, (an_hour_ago, an_hour_ago), follow_symlinks=False)
    not_made_yet = path_list_entry(later)  # dangling, but new: its directory may be about to be made
    path_list_entry(home / "another" / "site")
    assert not stale.is_symlink()
    assert not_made_yet.is_symlink()
