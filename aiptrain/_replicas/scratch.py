"""A job's scratch directories on the host: made in the system's temporary directory (short paths,
for the Unix sockets made there), named in the job's files as they are made, and removed at the
job's end or by whoever finds its supervisor dead.

Two kinds: the job's temporary directory (its process replicas' TMPDIR: what a trainer's
`tempfile` writes, such as TensorFlow's autograph files, goes with the job, as it went with the
service's VMs), and each container set's (its environment files, its relays' sockets).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

JOB_TEMP_PREFIX = "aiptrain-job-"
CONTAINERS_PREFIX = "aiptrain-containers-"
# Only directories named so are ever removed from a record.
_PREFIXES = (JOB_TEMP_PREFIX, CONTAINERS_PREFIX)


def make_scratch(prefix: str, record: Path | None) -> Path:
    """A new private directory, named in `record` (one line per directory; None: no reaper will
    look for it) before anything goes in it."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    if record is None:
        return directory
    # The record is never made again if the job's files are gone (no reaper would read it): the
    # directory's maker removes it at its end all the same.
    with contextlib.suppress(FileNotFoundError), record.open("a", encoding="utf-8") as lines:
        lines.write(f"{directory}\n")
    return directory


def remove_scratch(record: Path) -> None:
    """Remove the directories `record` names (those still there), then the record."""
    try:
        named = record.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return
    remove_directories(named)
    record.unlink(missing_ok=True)


def remove_directories(named: Sequence[str]) -> None:
    for line in named:
        directory = Path(line)
        if directory.is_absolute() and directory.name.startswith(_PREFIXES):
            shutil.rmtree(directory, ignore_errors=True)
