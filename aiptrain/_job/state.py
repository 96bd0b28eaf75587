"""The states of a job, on their own: commands that only wait for a state need no job model.

`aiptrain._job.spec` re-exports both names; this module imports nothing, so `jobs wait` on the local
backend can follow a job without loading pydantic.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class JobState(enum.StrEnum):
    STATE_UNSPECIFIED = "STATE_UNSPECIFIED"
    QUEUED = "QUEUED"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


@dataclass(frozen=True)
class WaitResult:
    """Where a `jobs wait` ended: the job as `jobs describe` shows it, and whether time ran out."""

    resource: dict[str, Any]
    timed_out: bool

    @property
    def state(self) -> str:
        return str(self.resource.get("state", JobState.STATE_UNSPECIFIED.value))
