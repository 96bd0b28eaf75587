"""A job's log a page at a time, from the end backwards, over the engine's forward-only cursor reads.

The store reads a log forwards from a cursor (`LocalJobEngine.logs(after=...)`, entries strictly
after a (timestamp, insert id) position). The console opens a job on its last lines and pages back
from there, so a page is found by searching for where it must start: the earliest position whose
window up to the page's end holds at most `PAGE_LINES` entries. The search bisects on the
timestamp (microseconds) and, if many lines share the boundary's timestamp (lines clamped to the
latest one when they arrive late), on the insert id within it; each probe is one indexed read of at
most `PAGE_LINES + 1` entries, so a page costs a few dozen such reads however long the log is,
and no read ever loads the whole log.

The task filter is the store's own (`task_name`); severity is kept or dropped as entries come. A
page whose lines the severity filter drops entirely is followed by the one before it, within a
bound, so a rare ERROR is found without paging by hand through thousands of INFO lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiptrain._backends.local.store import insert_id_for
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._replicas.clock import log_time, parse_log_time, utc_now

PAGE_LINES = 500
MAX_EMPTY_PAGES = 20  # pages read back past when the severity filter keeps none of them
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_SEQ = 2**63 - 1  # the store's largest sequence number: no entry's insert id is above it
# Cloud Logging's severities, in order.
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")

# Entries strictly after the cursor (None: from the start), oldest first, at most `limit`.
LogRead = Callable[[LogCursor | None, int], list[LogEntry]]


@dataclass(frozen=True)
class LogFilter:
    min_severity: str | None = None  # keep this severity and above

    def keeps(self, entry: LogEntry) -> bool:
        if self.min_severity is None:
            return True
        return _rank(entry.severity) >= _rank(self.min_severity)


def _rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


@dataclass(frozen=True)
class LogPage:
    entries: list[LogEntry]  # those the filter keeps, oldest first
    start: LogCursor | None  # the earlier page ends here; None: this page reaches the log's start
    end: LogCursor | None  # the last entry read, kept or not: a follower of the log continues after it


def cursor_text(cursor: LogCursor) -> str:
    return f"{log_time(cursor.timestamp)}~{cursor.insert_id}"


def parse_cursor(text: str | None) -> LogCursor | None:
    """A cursor as `cursor_text` writes it; None for none or a malformed one."""
    stamp, _, insert_id = (text or "").partition("~")
    if not stamp or not insert_id.isdigit():
        return None
    try:
        return LogCursor(parse_log_time(stamp), insert_id)
    except ValueError:
        return None


def entry_json(entry: LogEntry) -> dict[str, Any]:
    return {"c": cursor_text(entry.cursor), "t": log_time(entry.timestamp), "s": entry.severity or "DEFAULT",
            "k": entry.task_name, "r": entry.trial_id or "", "m": entry.message}


def page_before(read: LogRead, before: LogCursor | None, log_filter: LogFilter, *,
                lines: int = PAGE_LINES) -> LogPage:
    """The last page of entries up to `before` (None: the end of the log; a page's `start`, where the
    page after it begins exclusively) the filter keeps."""
    end: LogCursor | None = None
    for _ in range(MAX_EMPTY_PAGES):
        start = window_start(read, before, lines)
        window = _window(read, start, before, lines)
        if end is None and window:
            end = window[-1].cursor
        kept = [entry for entry in window if log_filter.keeps(entry)]
        if kept or start is None:
            return LogPage(kept, start, end)
        before = start
    return LogPage([], before, end)


def _window(read: LogRead, start: LogCursor | None, before: LogCursor | None, lines: int) -> list[LogEntry]:
    """Entries after `start` up to `before` (included: the page before starts at it, excluded), at
    most `lines + 1` (one more says "too many")."""
    return [entry for entry in read(start, lines + 1) if before is None or entry.cursor <= before]


def window_start(read: LogRead, before: LogCursor | None, lines: int) -> LogCursor | None:
    """The earliest position whose window up to `before` holds at most `lines` entries (None: the
    log's start does)."""
    def too_many(cursor: LogCursor) -> bool:
        return len(_window(read, cursor, before, lines)) > lines

    if len(_window(read, None, before, lines)) <= lines:
        return None
    first = read(None, 1)[0]
    # The window after (low, +inf) holds too many; the one after (high, +inf) does not.
    low = _micros(first.timestamp) - 1
    high = _micros(before.timestamp) if before is not None else max(_micros(utc_now()), low + 1)
    while too_many(_after_time(high)):  # lines stamped ahead of the clock
        high += max(high - low, 1)
    while high - low > 1:
        middle = (low + high) // 2
        if too_many(_after_time(middle)):
            low = middle
        else:
            high = middle
    if _window(read, _after_time(high), before, lines):
        return _after_time(high)
    # The lines stamped `high` alone overflow a page: split them by insert id.
    moment = _moment(high)
    low_id, high_id = 0, _LAST_SEQ
    while high_id - low_id > 1:
        middle = (low_id + high_id) // 2
        if too_many(LogCursor(moment, insert_id_for(middle))):
            low_id = middle
        else:
            high_id = middle
    return LogCursor(moment, insert_id_for(high_id))


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def _moment(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def _after_time(micros: int) -> LogCursor:
    """The position after every entry stamped `micros` or earlier, for reads and comparisons alike."""
    return LogCursor(_moment(micros), insert_id_for(_LAST_SEQ))
