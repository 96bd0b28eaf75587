"""A submit that stages into this machine checks for room first, and says so, before writing.

Staged packages land in the local store ($AIPTRAIN_HOME/storage) and the job's rows and first log
lines in the job store beside it. On a full file system the copy would stop half-way and the job
store would fail with SQLite's "database or disk is full" (or blame its write-ahead log), after the
upload. Checked before anything is written, the submit ends with one message naming the
directory, what is needed and what is free, and nothing is left behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from aiptrain.errors import OperationalError

# Room kept for the job store's rows and the job's first log lines (and SQLite's journal).
RESERVE_BYTES = 16 * 1024 * 1024


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def check_room(directory: Path, upload_bytes: int) -> None:
    """OperationalError if `directory`'s file system cannot take `upload_bytes` plus the reserve."""
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the store's folder may not exist yet: its file system is its parent's
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return  # nothing to measure with; the writes will say what goes wrong
    needed = upload_bytes + RESERVE_BYTES
    if free < needed:
        raise OperationalError(
            f"no space left on {probe} for this job: it needs {_mb(needed)} ({_mb(upload_bytes)} of packages to "
            f"stage and {_mb(RESERVE_BYTES)} for the job store and its first logs), and {_mb(free)} are free; "
            "nothing was uploaded or created",
            hint="free some space there, or set AIPTRAIN_HOME to a directory on a larger file system")
