"""The driver's log lines, and reading them back as log entries and lifecycle states.

The driver prints one line per entry on stdout, which the Ray job's log keeps:

    2026-01-02T03:04:05.123456Z<TAB>INFO<TAB>worker-replica-0<TAB><trial><TAB>message

(backslashes and newlines in the message escaped as `\\\\` and `\\n`), so `ray job logs` stays
readable and aiptrain gets the task names and severities back. Lines from anything else (Ray's own
messages) become `service` entries. Timestamps are the driver's print times, never earlier than
the line before, so a (timestamp, insertId) cursor never skips a line; insertId is the line number.

The driver's own lines carry the lifecycle: `Job PREPARING.`, `Job RUNNING.`, and for a failure
`Job failed: <errorMessage>`; `Cancel requested.` marks a stop in progress. A tuning job's
`Training output: <JSON>` lines carry its trainingOutput (the trials); the last one counts. A
container job's `Ran in: <JSON>` line lists each replica's image, its id and its container. Both
are for describe, not for people: `is_output_line` tells the log readers to leave them out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import JobState

SERVICE_TASK = "service"
PREPARING_LINE = "Job PREPARING."
RUNNING_LINE = "Job RUNNING."
SUCCEEDED_LINE = "Job completed successfully."
CANCELLED_LINE = "Job cancelled."
CANCEL_REQUESTED_LINE = "Cancel requested."
FAILED_PREFIX = "Job failed: "
WAITING_PREFIX = "Waiting for the cluster: "
OUTPUT_PREFIX = "Training output: "
RAN_IN_PREFIX = "Ran in: "
_HIDDEN_PREFIXES = (OUTPUT_PREFIX, RAN_IN_PREFIX)


def escape(message: str) -> str:
    return message.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "")


def unescape(text: str) -> str:
    out = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, "")
        out.append("\n" if following == "n" else following)
    return "".join(out)


def format_line(timestamp: datetime, severity: str, task_name: str, message: str, trial_id: str | None) -> str:
    stamp = timestamp.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp}\t{severity}\t{task_name}\t{trial_id or ''}\t{escape(message)}"


def _parse_stamp(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None


class LogParser:
    """Reads a Ray job's log as it grows: whole lines become entries (a partial last line waits).

    Every line is an entry and its insertId is its line number, so entry N sits at index N;
    lines from anything but the driver (Ray's own) get the previous line's time."""

    def __init__(self, since: datetime) -> None:
        self.entries: list[LogEntry] = []
        self.last = since
        self.partial = ""

    def feed(self, text: str) -> None:
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            self._add(line)

    def finish(self) -> None:
        """The log is complete: its last line counts even without a newline."""
        if self.partial:
            self._add(self.partial)
            self.partial = ""

    def after(self, cursor: LogCursor | None) -> list[LogEntry]:
        """The entries after `cursor` (an entry of this log), without looking at the earlier ones."""
        return self.entries[int(cursor.insert_id) + 1:] if cursor is not None else list(self.entries)

    def _add(self, line: str) -> None:
        line = line.removesuffix("\r")
        number = f"{len(self.entries):012d}"
        parts = line.split("\t", 4)
        stamp = _parse_stamp(parts[0]) if len(parts) == 5 else None
        if stamp is None:
            self.entries.append(LogEntry(self.last, number, "INFO", SERVICE_TASK, line))
            return
        self.last = max(self.last, stamp)
        self.entries.append(LogEntry(self.last, number, parts[1], parts[2], unescape(parts[4]),
                                     trial_id=parts[3] or None))


def parse_log(text: str, *, since: datetime, complete: bool = True) -> list[LogEntry]:
    """Every line of a Ray job's log as an entry; a job still running may be writing its last
    line, which then waits for the next read (`complete=False`)."""
    parser = LogParser(since)
    parser.feed(text)
    if complete:
        parser.finish()
    return parser.entries


@dataclass(frozen=True)
class Lifecycle:
    """What the driver's lines say about a job Ray reports as RUNNING."""

    state: JobState
    start_time: datetime | None = None
    error_message: str | None = None
    waiting: str | None = None  # why it still waits for the cluster
    training_output: dict[str, Any] | None = None  # a tuning job's trainingOutput, as last printed
    ran_in: list[str] | None = None  # a container job's replicas: image, image id, container


def is_output_line(entry: LogEntry) -> bool:
    return entry.task_name == SERVICE_TASK and not entry.trial_id and entry.message.startswith(_HIDDEN_PREFIXES)


def lifecycle(entries: list[LogEntry]) -> Lifecycle:
    state = JobState.QUEUED
    started: datetime | None = None
    error: str | None = None
    waiting: str | None = None
    cancelling = False
    output: dict[str, Any] | None = None
    ran_in: list[str] | None = None
    for entry in entries:
        if entry.task_name != SERVICE_TASK or entry.trial_id:
            continue
        message = entry.message
        if message == PREPARING_LINE:
            state, waiting = JobState.PREPARING, None
        elif message == RUNNING_LINE:
            state, started = JobState.RUNNING, entry.timestamp
        elif message.startswith(FAILED_PREFIX):
            error = message[len(FAILED_PREFIX):]
        elif message.startswith(WAITING_PREFIX):
            waiting = message[len(WAITING_PREFIX):]
        elif message == CANCEL_REQUESTED_LINE:
            cancelling = True
        elif message.startswith(OUTPUT_PREFIX):
            output = json.loads(message[len(OUTPUT_PREFIX):])
        elif message.startswith(RAN_IN_PREFIX):
            ran_in = [str(line) for line in json.loads(message[len(RAN_IN_PREFIX):])]
    if cancelling:
        state = JobState.CANCELLING
    return Lifecycle(state, started, error, waiting, output, ran_in)
