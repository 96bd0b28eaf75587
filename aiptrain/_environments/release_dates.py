"""The day each release of a project was published, as the configured package index says,
remembered on disk (`dates_dir`: in the install cache, on this machine or a Ray node) so a job
does not ask the index each time and works offline once asked.

A release is published on the day its first file was uploaded (PEP 691's `upload-time`, read
through the same client as the index of the day, `dated_index`): the day pip could first install
it. A project's dates are kept in `<directory>/<project>.json`, with the index they came from; a
release a file does not know (newer than the file, or another index's) asks the index again.
A past release's first upload never changes, so nothing expires.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from aiptrain._environments.dated_index import ConfiguredIndex, IndexFile, name_and_version
from aiptrain._environments.overlay import normalise

# Beside the install cache's entries; its eviction leaves names starting with a dot alone.
DATES_DIRECTORY = ".release-dates"


def dates_dir(install_cache: Path) -> Path:
    """Where the release dates are remembered, in the install cache `install_cache`."""
    return install_cache / DATES_DIRECTORY


class DatesUnavailable(Exception):
    """The index cannot be asked (offline, refused) and the dates are not remembered."""


class ReleaseDates:
    """Release days of the configured index's projects, remembered under `directory`."""

    def __init__(self, directory: Path, env: Mapping[str, str]) -> None:
        self.directory = directory
        self._env = env
        self._index: ConfiguredIndex | None = None  # made on the first question: reading pip's settings costs

    def published(self, project: str, version: str) -> datetime.date | None:
        """The day `project==version` was published; None when the index has no such release or
        gives no upload times. Raises DatesUnavailable when it must be asked and cannot be."""
        name, wanted = normalise(project), _canonical(version)
        known = self._remembered(name)
        if wanted not in known:
            known = self._asked(name)
        return known.get(wanted)

    def _file(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def _remembered(self, name: str) -> dict[str, datetime.date]:
        try:
            data = json.loads(self._file(name).read_text())
            if data.get("index") != self._configured().upstream:
                return {}
            return {version: datetime.date.fromisoformat(day) for version, day in data["releases"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # none yet, or unreadable: ask again

    def _asked(self, name: str) -> dict[str, datetime.date]:
        index = self._configured()
        try:
            files, _raw = index.page(name)
        except OSError as error:
            reason = getattr(error, "reason", None) or error
            raise DatesUnavailable(f"{index.upstream} cannot be reached ({reason})") from error
        if files is None:
            return {}  # an index without upload times: nothing to date by
        known = first_uploads(files)
        self._remember(name, index.upstream, known)
        return known

    def _remember(self, name: str, upstream: str, known: dict[str, datetime.date]) -> None:
        """Write the project's dates atomically (another job may be reading them); a cache that
        cannot be written only costs asking again."""
        data = {"index": upstream, "releases": {version: day.isoformat() for version, day in sorted(known.items())}}
        with contextlib.suppress(OSError):
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(handle, "w") as out:
                    json.dump(data, out)
                os.replace(temporary, self._file(name))
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)

    def _configured(self) -> ConfiguredIndex:
        if self._index is None:
            self._index = ConfiguredIndex(self._env)
        return self._index


def first_uploads(files: list[IndexFile]) -> dict[str, datetime.date]:
    """Each release's day (canonical version -> the UTC day of its first file's upload)."""
    days: dict[str, datetime.date] = {}
    for item in files:
        parsed = name_and_version(item.filename)
        if parsed is None or item.uploaded is None:
            continue
        version = _canonical(parsed[1])
        day = item.uploaded.astimezone(datetime.UTC).date()
        if version not in days or day < days[version]:
            days[version] = day
    return days


def _canonical(version: str) -> str:
    """`1.0` and `1.0.0` are one release to pip's `==` (PEP 440 pads with zeros): `1`."""
    text = version.strip().lower().removeprefix("v")
    release, separator, rest = text.partition("+")
    while release.endswith(".0") and release.count(".") >= 1:
        release = release[:-2]
    return release + separator + rest
