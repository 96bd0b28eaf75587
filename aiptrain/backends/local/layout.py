"""Where a job's files live under $AIPTRAIN_HOME/jobs (not to be confused with its --job-dir)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


@dataclass(frozen=True)
class JobLayout:
    root: Path

    @classmethod
    def of(cls, home: Path, project: str, job_id: str, key: int) -> JobLayout:
        # Job IDs and project IDs are path-safe once validated; anything else falls back to the key.
        if _SAFE_SEGMENT.match(project) and _SAFE_SEGMENT.match(job_id):
            return cls(home / "jobs" / project / job_id)
        return cls(home / "jobs" / "_by_key" / str(key))

    @property
    def site_dir(self) -> Path:
        """The trainer package(s), installed with pip --target; the replicas' PYTHONPATH."""
        return self.root / "site"

    @property
    def work_dir(self) -> Path:
        """Replicas run in work/<task name> (work/<trial>/<task name> for tuning trials)."""
        return self.root / "work"

    @property
    def supervisor_log(self) -> Path:
        return self.root / "supervisor.log"

    @property
    def space_reserve(self) -> Path:
        """A file the supervisor holds while the job runs and deletes when the disk is full, so the
        job's end can still be written."""
        return self.root / "space-reserve"
