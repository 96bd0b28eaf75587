"""The emulator's record of Vertex AI CustomJobs and the local-engine jobs that run them.

A CustomJob has a numeric ID (`projects/P/locations/L/customJobs/1234567890123456789`) and a
display name that need not be unique, while the engine keys jobs by a unique job ID; each record
links the two (engine job ID `customjob_<numeric id>`) and keeps the CustomJob as it was sent.
Records are small JSON files under `<home>/emulator/custom_jobs/`, so they survive a restart of
the server like the engine's own jobs do. File names are the numeric IDs we generate; nothing a
client sends ever becomes part of a path.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Vertex's custom job IDs are 19-digit numbers.
_ID_LOW, _ID_HIGH = 10**18, 9 * 10**18


@dataclass(frozen=True)
class CustomJobRecord:
    numeric_id: str
    project: str
    location: str
    engine_job_id: str
    created_ns: int
    custom_job: dict[str, Any]  # the request body, input fields only

    @property
    def name(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/customJobs/{self.numeric_id}"

    def to_json(self) -> dict[str, Any]:
        return {
            "numericId": self.numeric_id,
            "project": self.project,
            "location": self.location,
            "engineJobId": self.engine_job_id,
            "createdNs": self.created_ns,
            "customJob": self.custom_job,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CustomJobRecord:
        return cls(
            numeric_id=str(data["numericId"]),
            project=str(data["project"]),
            location=str(data["location"]),
            engine_job_id=str(data["engineJobId"]),
            created_ns=int(data["createdNs"]),
            custom_job=dict(data["customJob"]),
        )


def engine_job_id_for(numeric_id: str) -> str:
    return f"customjob_{numeric_id}"


class CustomJobStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, numeric_id: str) -> Path | None:
        return self.directory / f"{numeric_id}.json" if numeric_id.isdigit() else None

    def reserve(self, project: str, location: str, custom_job: dict[str, Any]) -> CustomJobRecord:
        """A new record with a fresh numeric ID, written before the engine job is created."""
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            numeric_id = str(_ID_LOW + secrets.randbelow(_ID_HIGH - _ID_LOW))
            path = self.directory / f"{numeric_id}.json"
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                continue
            record = CustomJobRecord(numeric_id, project, location, engine_job_id_for(numeric_id),
                                     time.time_ns(), custom_job)
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                json.dump(record.to_json(), stream)
            return record

    def forget(self, numeric_id: str) -> None:
        path = self._path(numeric_id)
        if path is not None:
            path.unlink(missing_ok=True)

    def get(self, project: str, location: str, numeric_id: str) -> CustomJobRecord | None:
        record = self.by_numeric_id(numeric_id)
        if record is None or (record.project, record.location) != (project, location):
            return None
        return record

    def by_numeric_id(self, numeric_id: str) -> CustomJobRecord | None:
        path = self._path(numeric_id)
        if path is None:
            return None
        try:
            return CustomJobRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            return None

    def list(self, project: str, location: str) -> list[CustomJobRecord]:
        """Newest first, as Vertex lists them."""
        records = []
        for path in self.directory.glob("*.json") if self.directory.is_dir() else ():
            record = self.by_numeric_id(path.stem)
            if record is not None and (record.project, record.location) == (project, location):
                records.append(record)
        return sorted(records, key=lambda r: (r.created_ns, r.numeric_id), reverse=True)
