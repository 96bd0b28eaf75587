"""Scratch directories named after the process that made them, and swept once it is gone.

Building a package copies its sources into a scratch directory under the system's temporary
directory and stages the result in a `.tmp-` directory of the build cache; a submitter killed
meanwhile (an OOM kill, a closed terminal, kill -9) never removes them. Their names carry the
maker's pid, so the next build removes those whose maker is no longer running, and never one a
live process owns (a pid in use, this process's own, another user's directory).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

SOURCES_PREFIX = "aiptrain-build-"
STAGING_PREFIX = ".tmp-"


def owned_prefix(prefix: str) -> str:
    """`prefix` followed by this process's pid: what a scratch directory made now is named with."""
    return f"{prefix}{os.getpid()}-"


def temporary_directory() -> Path:
    """The directory `tempfile` makes scratch directories in, found the way it looks first
    (importing `tempfile` loads `shutil`, which a cache hit does not need)."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(name)
        if value:
            return Path(value)
    return Path("/tmp")  # noqa: S108 (only listed, for directories this user's builds named)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def sweep_leftovers(directory: Path, prefix: str) -> list[Path]:
    """Remove the scratch directories in `directory` named `prefix<pid>-...` whose maker is gone."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    removed: list[Path] = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or int(match[1]) == os.getpid() or _running(int(match[1])):
            continue
        with contextlib.suppress(OSError):
            if entry.lstat().st_uid != os.getuid() or entry.is_symlink():
                continue
            import shutil  # only when there is something to remove: a cache hit stays light

            shutil.rmtree(entry)
            removed.append(entry)
    return removed
