"""aiptrain: AI Platform Training jobs, locally, on Vertex AI, or on any ml v1 endpoint.

As a library (docs/python-api.md):

    import aiptrain

    job = aiptrain.submit("my_job", package_path="trainer", module_name="trainer.task", args=["--epochs", "3"])
    ended = aiptrain.wait("my_job")

`submit`, `dry_run`, `get`, `list`, `cancel`, `wait`, `logs` and `Client` (one backend and project for them
all) come from aiptrain._api.client, and `Job`, `JobState` and `LogEntry` (what they return) from
aiptrain.job, each loaded on first use so that `import aiptrain` stays light; errors are the
`AiptrainError` family (aiptrain.errors).

`__all__` is the public surface, with `aiptrain.errors`: every module of a subpackage is internal
and may change without notice (docs/contributing.md). tests/test_public_api.py keeps `__all__`
equal to what docs/python-api.md uses.

The folders below are layers (ARCHITECTURE.md); each folder's docstring says what it may import.
The loose modules here (`errors`, `paths`, `cache_eviction`, `loopback`) import nothing of aiptrain
but `errors`, so every layer may use them.
"""

from __future__ import annotations

import sys
import types

# Not `typing.TYPE_CHECKING`: `import aiptrain` (which every submodule's import runs) loads nothing
# it does not need, not even `typing` (tests/packaging: a cache hit stays interpreter start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from aiptrain._api.client import (
        AiptrainWarning,
        Client,
        WaitTimedOut,
        cancel,
        dry_run,
        get,
        list,
        logs,
        submit,
        wait,
    )
    from aiptrain._job.logs import LogEntry
    from aiptrain._job.spec import Job
    from aiptrain._job.state import JobState
    from aiptrain.errors import AiptrainError, JobAlreadyFinished, NotFound, UsageError, ValidationFailed

__version__ = "0.1.0"
__all__ = ["AiptrainError", "AiptrainWarning", "Client", "Job", "JobAlreadyFinished", "JobState", "LogEntry",
           "NotFound", "UsageError", "ValidationFailed", "WaitTimedOut", "__version__", "cancel", "dry_run", "get",
           "list", "logs", "submit", "wait"]
_API = frozenset({"AiptrainWarning", "Client", "WaitTimedOut", "cancel", "dry_run", "get", "list", "logs", "submit",
                  "wait"})
_ERRORS = frozenset({"AiptrainError", "JobAlreadyFinished", "NotFound", "UsageError", "ValidationFailed"})


class _Package(types.ModuleType):
    """`aiptrain.submit` is the function even once the subpackage aiptrain.submit is imported
    (the import system binds a subpackage on its parent; `from aiptrain._submit import ...` finds
    it in sys.modules all the same)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _API:
        from aiptrain._api import client

        return getattr(client, name)
    if name in _ERRORS:
        from aiptrain import errors

        return getattr(errors, name)
    if name == "Job":
        from aiptrain._job.spec import Job

        return Job
    if name == "JobState":
        from aiptrain._job.state import JobState

        return JobState
    if name == "LogEntry":
        from aiptrain._job.logs import LogEntry

        return LogEntry
    raise AttributeError(f"module 'aiptrain' has no attribute {name!r}")
