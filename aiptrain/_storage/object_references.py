"""References to objects of the local store: a submit holds the packages it staged until its job
is stored, and a prune deletes an object only when nobody holds it.

A reference is a shared `flock` on the object's file, taken once the object is staged (uploaded,
or found and reused) and released when the submit has stored its job (or given up): the job then
names the object, which is what keeps it from then on. Deleting takes the exclusive lock without
waiting, so an object some submit holds is never deleted; a submit that finds its object deleted
before it could hold it stages it again. The prune decides and deletes while it holds the job
store's write lock (no job can be stored meanwhile), so between them every object a job will
name is either named by a stored job, or held.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType


class ObjectReferences:
    """The references one submit holds; released by `close` (or leaving the `with` block)."""

    def __init__(self) -> None:
        self._descriptors: dict[Path, int] = {}

    def hold(self, path: Path) -> bool:
        """Hold the object file at `path`; False when there is no file there to hold (it was
        deleted since it was staged). Blocks only while a deletion of that file is under way."""
        if path in self._descriptors:
            return True
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH)
            if not _still_at(descriptor, path):
                os.close(descriptor)
                return False
        except BaseException:
            os.close(descriptor)
            raise
        self._descriptors[path] = descriptor
        return True

    def close(self) -> None:
        descriptors, self._descriptors = self._descriptors, {}
        for descriptor in descriptors.values():
            with contextlib.suppress(OSError):
                os.close(descriptor)

    def __enter__(self) -> ObjectReferences:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def delete_unless_held(path: Path) -> bool:
    """Delete the object file at `path` unless a submit holds it; whether it is gone now."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError:
        if path.is_symlink():  # nobody can hold a link (`hold` does not follow one)
            path.unlink(missing_ok=True)
            return True
        return False
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if _still_at(descriptor, path):  # not staged again under the same name meanwhile
            path.unlink(missing_ok=True)
            return True
        return False
    finally:
        os.close(descriptor)


def _still_at(descriptor: int, path: Path) -> bool:
    """Whether the open file is still the one at `path` (not unlinked, not replaced)."""
    opened = os.fstat(descriptor)
    try:
        current = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return opened.st_nlink > 0 and (current.st_dev, current.st_ino) == (opened.st_dev, opened.st_ino)
