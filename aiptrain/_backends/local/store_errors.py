"""What a failing job store means to the user: SQLite's and the file system's errors, explained.

The store lives in $AIPTRAIN_HOME; when that directory is read-only, or the database's
write-ahead log (`jobs.db-wal`) is deleted while another aiptrain process has it open, SQLite
answers "attempt to write a readonly database" or "disk I/O error", and on a full disk "database
or disk is full". Those become an OperationalError (exit 1) that names the file and says what to do.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiptrain._paths import HomeLayout
from aiptrain.errors import OperationalError

_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


def is_out_of_space(error: BaseException) -> bool:
    """True for a write that failed because the file system (or the user's quota) is full."""
    if isinstance(error, OSError):
        return error.errno in _NO_SPACE_ERRNOS
    if isinstance(error, sqlite3.Error):
        return getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(error)
    return False


def note(message: str) -> None:
    """A line for the process's own log (a supervisor's is supervisor.log), never an error itself:
    that log may sit on the very disk that just filled up."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


def store_failure(error: BaseException, database: Path) -> OperationalError:
    """The OperationalError to raise for `error` met while using the store at `database`."""
    home = database.parent
    reason = (error.strerror if isinstance(error, OSError) else None) or str(error)
    read_only = (isinstance(error, OSError) and error.errno in _READ_ONLY_ERRNOS) or (
        isinstance(error, sqlite3.Error) and ("readonly" in reason or "unable to open" in reason))
    if read_only:
        return OperationalError(f"the job store {database} cannot be written: {reason}",
                                hint=f"AIPTRAIN_HOME ({home}) must be a writable directory; fix its permissions "
                                "or set AIPTRAIN_HOME to another one")
    if is_out_of_space(error):
        return OperationalError(f"no space left on {home} for the job store {database}: {reason}",
                                hint=f"free some space on the file system of AIPTRAIN_HOME ({home}), then retry")
    if isinstance(error, sqlite3.Error) and "disk I/O error" in reason:
        return OperationalError(
            f"the job store {database} cannot be read: {reason} (its write-ahead log {database.name}-wal "
            "was probably deleted or damaged while another aiptrain process had it open)",
            hint="stop the aiptrain processes using this AIPTRAIN_HOME (`local serve`, running jobs' "
            "supervisors), then retry; never delete jobs.db-wal or jobs.db-shm by hand")
    return OperationalError(f"the job store {database} failed: {reason}",
                            hint=f"check the disk and the permissions of AIPTRAIN_HOME ({home})")


@contextmanager
def explained_store_errors(home: Path) -> Iterator[None]:
    """SQLite's errors under the block, raised as the OperationalError `store_failure` explains."""
    try:
        yield
    except sqlite3.Error as error:
        raise store_failure(error, HomeLayout(home).jobs_db) from error
