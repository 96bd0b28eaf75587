"""The job store is checked before use when it was not left cleanly, and refused when damaged.

Writing into a damaged SQLite file spreads the damage, so the store is checked with `PRAGMA
quick_check` (a read of every page, no writes) when it is opened by the only process using it
and the last one did not close it cleanly: a write-ahead log left behind (a killed process, a
machine that lost power) or a file that changed since the last clean close (`jobs.db.clean`
holds its size and modification time then; a copy or an edit from outside changes them). Every
open store holds a shared lock on `store-users.lock`; an exclusive one tells "nobody else has it
open". A store in use by others is not checked: it may be mid-write, and they would have met the
damage already. A damaged store is an OperationalError naming the recovery commands; nothing is
written into it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from pathlib import Path

from aiptrain.errors import OperationalError

# quick_check lists at most this many problems; the first few say enough.
_SHOWN_PROBLEMS = 3


def _stamp_path(database: Path) -> Path:
    return database.with_name(database.name + ".clean")


def _stamp(database: Path) -> str:
    info = database.stat()
    return f"{info.st_size} {info.st_mtime_ns}"


def damaged_store(database: Path, problems: list[str]) -> OperationalError:
    shown = "; ".join(problems[:_SHOWN_PROBLEMS])
    backup = database.with_name(database.name + ".damaged")
    recovered = database.with_name(database.name + ".recovered")
    return OperationalError(
        f"the job store {database} is damaged ({shown}); aiptrain will not write into it",
        hint=f"stop every aiptrain process using it, keep a copy (cp {database} {backup}), recover what can be "
        f"read (sqlite3 {backup} .recover | sqlite3 {recovered}), then move {recovered} to {database}; "
        f"or move {database} away to start an empty store")


class UsersLock:
    """The shared lock an open store holds on `store-users.lock` (see the module docstring)."""

    def __init__(self, database: Path) -> None:
        # Not named jobs.db*: an open file of that name keeps supervisors from being forked.
        self._descriptor = os.open(database.with_name("store-users.lock"), os.O_CREAT | os.O_RDWR, 0o600)

    def try_exclusive(self) -> bool:
        try:
            fcntl.flock(self._descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def share(self) -> None:
        fcntl.flock(self._descriptor, fcntl.LOCK_SH)

    def close(self) -> None:
        if self._descriptor >= 0:
            os.close(self._descriptor)
            self._descriptor = -1


def needs_check(database: Path) -> bool:
    """Whether the store, opened by its only user, was left uncleanly (see the module docstring)."""
    if not database.exists() or database.stat().st_size == 0:
        return False  # a new store
    wal = database.with_name(database.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return True
    try:
        return _stamp_path(database).read_text(encoding="ascii").strip() != _stamp(database)
    except (OSError, UnicodeDecodeError):
        return True  # never closed cleanly by this version


def check(database: Path) -> None:
    """PRAGMA quick_check on a connection of its own; the OperationalError `damaged_store` if it fails."""
    try:
        rows = _quick_check(f"file:{database}?mode=ro")  # read-only: no checkpoint into a damaged file
    except sqlite3.OperationalError:
        rows = None  # a WAL without its -shm index cannot be opened read-only
    except sqlite3.DatabaseError as error:  # "file is not a database", "database disk image is malformed"
        raise damaged_store(database, [str(error)]) from None
    if rows is None:
        try:
            rows = _quick_check(f"file:{database}")
        except sqlite3.DatabaseError as error:
            raise damaged_store(database, [str(error)]) from None
    if rows != ["ok"]:
        raise damaged_store(database, rows)


def _quick_check(uri: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        return [str(row[0]) for row in conn.execute("PRAGMA quick_check")]


def record_clean_close(database: Path) -> None:
    """Called by the last user after closing its connection: the file as it was left cleanly."""
    with contextlib.suppress(OSError):
        stamp = _stamp_path(database)
        partial = stamp.with_name(f".{stamp.name}.{os.getpid()}.partial")
        partial.write_text(_stamp(database), encoding="ascii")
        partial.replace(stamp)
