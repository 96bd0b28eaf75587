"""`Backend.tail_cursor` of a backend that cannot seek: the log read through once, page by page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from aiptrain._backends.base import LOG_PAGE, Backend, read_through_tail
from aiptrain._job.logs import LogCursor, LogEntry

START = datetime(2026, 1, 1, tzinfo=UTC)


class PagedLog:
    """`read_logs` over `count` entries, at most `limit` a read, counting the reads."""

    def __init__(self, count: int) -> None:
        self.entries = [LogEntry(START + timedelta(seconds=n), f"{n:08d}", "INFO", "master-replica-0", f"line {n}")
                        for n in range(count)]
        self.reads = 0

    def read_logs(self, job_id: str, *, after: LogCursor | None = None, task_name: str | None = None,
                  limit: int = 1000) -> list[LogEntry]:
        self.reads += 1
        newer = [entry for entry in self.entries
                 if after is None or (entry.timestamp, entry.insert_id) > (after.timestamp, after.insert_id)]
        return newer[:limit]


def test_the_cursor_is_the_one_before_the_last_entries_across_pages() -> None:
    log = PagedLog(LOG_PAGE + 5)
    found = read_through_tail(cast(Backend, log), "job", 3)
    assert found == log.entries[-4].cursor
    assert log.reads == 2  # one full page, then the rest


def test_fewer_entries_than_asked_for_start_where_the_reader_was() -> None:
    log = PagedLog(4)
    after = log.entries[0].cursor
    assert read_through_tail(cast(Backend, log), "job", 3, after=after) == after
    assert read_through_tail(cast(Backend, log), "job", 2, after=after) == log.entries[1].cursor
    assert read_through_tail(cast(Backend, log), "job", 10) is None
