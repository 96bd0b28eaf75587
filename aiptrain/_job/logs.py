"""One log line of a job and a position in a job's log, as every layer speaks of them.

The engine writes `LogEntry`s, the emulator serves them, backends read them and followers print
them; a `LogCursor` (timestamp, insert_id) is where a reader resumes. They sit at the top of the
package so that none of those layers imports another just for these two types.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LogEntry:
    """One log line of a job, as Cloud Logging would hold it."""

    timestamp: datetime  # timezone-aware UTC
    insert_id: str
    severity: str  # DEFAULT, DEBUG, INFO, WARNING, ERROR, CRITICAL
    task_name: str  # master-replica-0, worker-replica-1, ps-replica-0, evaluator-replica-0, service
    message: str
    trial_id: str | None = None

    @property
    def cursor(self) -> LogCursor:
        return LogCursor(self.timestamp, self.insert_id)


@dataclass(frozen=True, order=True)
class LogCursor:
    """A position in a job's log: entries strictly after (timestamp, insert_id) are new."""

    timestamp: datetime
    insert_id: str
