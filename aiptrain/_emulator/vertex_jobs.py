"""The emulator's record of Vertex AI jobs (CustomJobs, HyperparameterTuningJobs) and the
local-engine jobs that run them.

A Vertex job has a numeric ID (`projects/P/locations/L/customJobs/1234567890123456789`) and a
display name that need not be unique, while the engine keys jobs by a unique job ID; each record
links the two (engine job ID `customjob_<numeric id>` or `hptuningjob_<numeric id>`) and keeps
the job as it was sent. Records are small JSON files, one directory per collection under
`<home>/emulator/`, so they survive a restart of the server like the engine's own jobs do. File
names are the numeric IDs we generate; nothing a client sends ever becomes part of a path.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CUSTOM_JOBS = "customJobs"
TUNING_JOBS = "hyperparameterTuningJobs"
TRAINING_PIPELINES = "trainingPipelines"  # each runs as a CustomJob (`pipelines_api`), not an engine job of its own
# Collection -> the prefix of its engine job IDs.
_ENGINE_PREFIX = {CUSTOM_JOBS: "customjob", TUNING_JOBS: "hptuningjob", TRAINING_PIPELINES: "trainingpipeline"}
# Vertex's job IDs are 19-digit numbers.
_ID_LOW, _ID_HIGH = 10**18, 9 * 10**18


def vertex_job_name(project: str, location: str, collection: str, numeric_id: str) -> str:
    """`projects/P/locations/L/COLLECTION/N`, the resource name of a Vertex job. Vertex answers with
    the project's number as P; a client may name the job with the project's ID."""
    return f"projects/{project}/locations/{location}/{collection}/{numeric_id}"


@dataclass(frozen=True)
class VertexJobRecord:
    numeric_id: str
    project: str
    location: str
    engine_job_id: str
    created_ns: int
    request: dict[str, Any]  # the request body, input fields only
    collection: str = CUSTOM_JOBS

    @property
    def name(self) -> str:
        return vertex_job_name(self.project, self.location, self.collection, self.numeric_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "numericId": self.numeric_id,
            "project": self.project,
            "location": self.location,
            "engineJobId": self.engine_job_id,
            "createdNs": self.created_ns,
            "customJob": self.request,
            "collection": self.collection,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VertexJobRecord:
        return cls(
            numeric_id=str(data["numericId"]),
            project=str(data["project"]),
            location=str(data["location"]),
            engine_job_id=str(data["engineJobId"]),
            created_ns=int(data["createdNs"]),
            request=dict(data["customJob"]),
            collection=str(data.get("collection") or CUSTOM_JOBS),
        )


def engine_job_id_for(numeric_id: str, collection: str = CUSTOM_JOBS) -> str:
    return f"{_ENGINE_PREFIX[collection]}_{numeric_id}"


class VertexJobStore:
    """The records of one collection (`customJobs` or `hyperparameterTuningJobs`)."""

    def __init__(self, directory: Path, collection: str = CUSTOM_JOBS) -> None:
        self.directory = directory
        self.collection = collection

    def _path(self, numeric_id: str) -> Path | None:
        return self.directory / f"{numeric_id}.json" if numeric_id.isdigit() else None

    def reserve(self, project: str, location: str, request: dict[str, Any]) -> VertexJobRecord:
        """A new record with a fresh numeric ID, written before the engine job is created."""
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            numeric_id = str(_ID_LOW + secrets.randbelow(_ID_HIGH - _ID_LOW))
            path = self.directory / f"{numeric_id}.json"
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                continue
            record = VertexJobRecord(numeric_id, project, location, engine_job_id_for(numeric_id, self.collection),
                                     time.time_ns(), request, self.collection)
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                json.dump(record.to_json(), stream)
            return record

    def forget(self, numeric_id: str) -> None:
        path = self._path(numeric_id)
        if path is not None:
            path.unlink(missing_ok=True)

    def get(self, project: str, location: str, numeric_id: str) -> VertexJobRecord | None:
        record = self.by_numeric_id(numeric_id)
        if record is None or (record.project, record.location) != (project, location):
            return None
        return record

    def by_numeric_id(self, numeric_id: str) -> VertexJobRecord | None:
        path = self._path(numeric_id)
        if path is None:
            return None
        try:
            record = VertexJobRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            return None
        return record if record.collection == self.collection else None

    def list(self, project: str, location: str) -> list[VertexJobRecord]:
        """Newest first, as Vertex lists them."""
        records = []
        for path in self.directory.glob("*.json") if self.directory.is_dir() else ():
            record = self.by_numeric_id(path.stem)
            if record is not None and (record.project, record.location) == (project, location):
                records.append(record)
        return sorted(records, key=lambda r: (r.created_ns, r.numeric_id), reverse=True)
