"""A job's directory under $AIPTRAIN_HOME/jobs is its own: a new job never inherits the files of an
older one that had the same ID (a store moved away to start empty, a pruned job)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
