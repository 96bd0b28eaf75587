"""Project IDs and project numbers, handled as Google's APIs handle them.

A project has an ID (`my-project`) and a number (`123456789012`). Vertex AI accepts either in a
resource name and answers with the number (`projects/123456789012/locations/...`); ml v1 and Cloud
Logging are used with the ID. The emulator gives each project ID a stable 12-digit number derived
from it, records the pair when it first sees the ID (`projects.json` in the emulator's state
directory, so a number still leads to its ID after a restart), and resolves those numbers to their
IDs: jobs are found whichever form a client sends. An unknown number is a project of its own.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from aiptrain._job.project_id import project_number_for

__all__ = ["ProjectDirectory", "project_number_for"]


class ProjectDirectory:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._ids_by_number: dict[str, str] | None = None

    def _known(self) -> dict[str, str]:
        if self._ids_by_number is None:
            try:
                data = json.loads(self._path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            self._ids_by_number = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        return self._ids_by_number

    def number(self, project: str) -> str:
        """The project's number (a number is returned as it is); the pair is remembered."""
        if project.isdigit():
            return project
        number = project_number_for(project)
        with self._lock:
            known = self._known()
            if known.get(number) != project:
                known[number] = project
                self._save(known)
        return number

    def project_id(self, project: str) -> str:
        """The ID of a project named by ID or by a number this emulator handed out."""
        if not project.isdigit():
            return project
        with self._lock:
            return self._known().get(project, project)

    def _save(self, known: dict[str, str]) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        partial = self._path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.partial")
        partial.write_text(json.dumps(known, sort_keys=True), encoding="utf-8")
        partial.replace(self._path)
