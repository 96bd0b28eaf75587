"""A job's training curves: the scalars of the summary event files under its output directory.

Where: the job's `--job-dir` (a Vertex job's base output directory), which trainers and the
Keras TensorBoard callback write under (AIP_TENSORBOARD_LOG_DIR is `JOB_DIR/logs/`; a tuning
trial's is `JOB_DIR/TRIAL/...`), mapped into the local store the way the replicas' `gs://` is.
Every `*.tfevents.*` file below it counts, as `tuning.summary_events` reads them; the folder of a
file, relative to the job dir, names its run (`logs/train`, `3/logs/validation`), as in
TensorBoard. A job whose files are elsewhere (a GCS emulator behind `local serve`) shows none.

This is the console's own finder until `aiptrain jobs tensorboard` offers one to share.

Event files only grow, so `SummaryReader` keeps what it read of each file and reads only what was
appended since: a page refreshed every few seconds during training costs the new records alone.
The walk and the number of files are bounded, so a job dir holding a data set stays cheap.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from aiptrain._emulator.console.event_records import read_records, scalars_of
from aiptrain._storage.local import local_path_for
from aiptrain.errors import UsageError

EVENT_MARK = ".tfevents."
MAX_EVENT_FILES = 64
MAX_WALKED = 5000  # directory entries looked at per job
MAX_POINTS = 2000  # per run and tag; beyond, every other point is dropped (the curve keeps its shape)
MAX_REMEMBERED_FILES = 512

# tag -> run -> [(step, value)], steps ascending
Curves = dict[str, dict[str, list[tuple[int, float]]]]


def summary_root(job_dir: str | None, storage_root: Path) -> Path | None:
    """Where a job's output directory is in the local store; None without one (or outside it)."""
    if not job_dir or not job_dir.startswith("gs://"):
        return None
    try:
        return local_path_for(job_dir, storage_root)
    except UsageError:
        return None


def event_files(root: Path) -> list[Path]:
    """The event files under `root`, in path order, within the walk's bounds."""
    found: list[Path] = []
    walked = 0
    for folder, subfolders, files in os.walk(root):
        subfolders.sort()
        walked += len(subfolders) + len(files)
        found += [Path(folder, name) for name in sorted(files) if EVENT_MARK in name]
        if walked > MAX_WALKED or len(found) >= MAX_EVENT_FILES:
            break
    return sorted(found)[:MAX_EVENT_FILES]


@dataclass
class _FileRead:
    identity: tuple[int, int]  # (device, inode): a file replaced under the same name is read anew
    offset: int = 0
    points: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)  # tag -> (step, wall, value)


class SummaryReader:
    def __init__(self) -> None:
        self._files: OrderedDict[Path, _FileRead] = OrderedDict()
        self._lock = threading.Lock()

    def curves(self, root: Path) -> Curves:
        curves: Curves = {}
        for path in event_files(root):
            run = path.parent.relative_to(root).as_posix()
            for tag, read in self._read(path).items():
                curves.setdefault(tag, {}).setdefault(run, []).extend((step, value) for step, _wall, value in read)
        for runs in curves.values():
            for run, points in runs.items():
                runs[run] = _thinned(sorted(points, key=lambda point: point[0]))
        return dict(sorted(curves.items()))

    def _read(self, path: Path) -> dict[str, list[tuple[int, float, float]]]:
        try:
            status = path.stat()
        except OSError:
            return {}
        identity = (status.st_dev, status.st_ino)
        with self._lock:
            known = self._files.get(path)
            if known is None or known.identity != identity or status.st_size < known.offset:
                known = _FileRead(identity)
            self._files[path] = known
            self._files.move_to_end(path)
            while len(self._files) > MAX_REMEMBERED_FILES:
                self._files.popitem(last=False)
            if status.st_size > known.offset:
                self._read_from(path, known)
            return {tag: list(points) for tag, points in known.points.items()}

    @staticmethod
    def _read_from(path: Path, known: _FileRead) -> None:
        try:
            with path.open("rb") as stream:
                stream.seek(known.offset)
                for payload, end in read_records(stream):
                    known.offset = end
                    for scalar in scalars_of(payload):
                        points = known.points.setdefault(scalar.tag, [])
                        points.append((scalar.step, scalar.wall_time, scalar.value))
                        if len(points) > 2 * MAX_POINTS:
                            del points[::2]
        except OSError:
            return


def _thinned(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    while len(points) > MAX_POINTS:
        points = points[::2] if len(points) % 2 else [*points[:-1:2], points[-1]]
    return points
