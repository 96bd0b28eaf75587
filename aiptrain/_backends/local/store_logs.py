"""The local job store's logs: lines stored in commit order, and the cursor reads that page them.

A log insert clamps its timestamps inside its write transaction so that `(timestamp, insert_id)`
grows in commit order: a reader holding a cursor never misses a line committed later with an
earlier timestamp. Every read is keyset pagination over an index, so the newest page of a long
log costs what the oldest does. These reads serve `jobs stream-logs` (through the engine), the
emulator's Cloud Logging `entries:list` and the console's log pages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from aiptrain._backends.local.store_connection import StoreConnection
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._replicas.clock import log_time, parse_log_time

if TYPE_CHECKING:
    from aiptrain._backends.local.store_connection import Transaction

# Zero-padded so that text order and numeric order of insert ids agree.
INSERT_ID_WIDTH = 20


@dataclass(frozen=True)
class PendingLine:
    """A captured line waiting to be stored; the store assigns its final timestamp and id."""

    captured: datetime
    severity: str
    task_name: str
    message: str
    trial_id: str | None = None


def insert_id_for(seq: int) -> str:
    return str(seq).zfill(INSERT_ID_WIDTH)


class LogQueries(StoreConnection):
    """The logs section of the job store."""

    def append_logs(self, key: int, lines: Sequence[PendingLine]) -> None:
        """Store lines in capture order, each stamped no earlier than the job's latest line."""
        if not lines:
            return
        with self._write() as tx:
            append_logs_in_tx(tx, key, lines)

    def read_logs(
        self, key: int, *, after: LogCursor | None = None, task_name: str | None = None, limit: int = 1000
    ) -> list[LogEntry]:
        """Entries strictly after `after` in (timestamp, insert_id) order, at most `limit`."""
        where, args = _job_log_condition(key, after, task_name)
        sql = f"SELECT seq, timestamp, severity, task_name, trial_id, message FROM logs WHERE {where}"  # noqa: S608
        sql += " ORDER BY timestamp, seq LIMIT ?"
        return [_log_entry(row) for row in self._read(sql, [*args, limit])]

    def tail_cursor(
        self, key: int, count: int, *, after: LogCursor | None = None, task_name: str | None = None
    ) -> LogCursor | None:
        """The cursor the last `count` entries after `after` follow (`after` itself when there are
        fewer): one seek from the newest end of the index, whatever the log's length."""
        where, args = _job_log_condition(key, after, task_name)
        sql = f"SELECT seq, timestamp FROM logs WHERE {where}"  # noqa: S608
        rows = self._read(sql + " ORDER BY timestamp DESC, seq DESC LIMIT 1 OFFSET ?", [*args, count])
        if not rows:
            return after
        return LogCursor(parse_log_time(rows[0]["timestamp"]), insert_id_for(rows[0]["seq"]))

    def read_project_logs(
        self, project: str, *, job_ids: Sequence[str] | None = None, after: LogCursor | None = None,
        descending: bool = False, not_before: datetime | None = None, limit: int = 1000,
    ) -> list[JobLogEntry]:
        """Entries of the project's jobs (only `job_ids` when given) strictly after `after` in
        (timestamp, insert_id) order, or strictly before it when `descending`; none earlier than
        `not_before`; at most `limit`.

        Keyset pagination over an index, so the newest page costs what the oldest does: one job's
        lines are read through `logs_by_cursor`, several jobs' through `logs_by_time`.
        """
        columns = "l.seq, l.timestamp, l.severity, l.task_name, l.trial_id, l.message, j.job_id, j.vertex_job_id"
        sql = f"SELECT {columns} FROM logs l JOIN jobs j ON j.key = l.job_key WHERE "  # noqa: S608
        args: list[object] = []
        if job_ids is not None and len(job_ids) == 1:
            row = self.connection().execute("SELECT key FROM jobs WHERE project = ? AND job_id = ?",
                                            (project, job_ids[0])).fetchone()
            if row is None:
                return []
            sql += "l.job_key = ?"
            args.append(row[0])
        else:
            sql += "j.project = ?"
            args.append(project)
            if job_ids is not None:
                if not job_ids:
                    return []
                sql += f" AND j.job_id IN ({','.join('?' * len(job_ids))})"
                args.extend(job_ids)
        if after is not None:
            stamp = log_time(after.timestamp)
            seq = int(after.insert_id) if after.insert_id.isdigit() else (0 if not descending else 1 << 62)
            sql += f" AND (l.timestamp, l.seq) {'<' if descending else '>'} (?, ?)"
            args += [stamp, seq]
        if not_before is not None:
            sql += " AND l.timestamp >= ?"
            args.append(log_time(not_before))
        order = "DESC" if descending else "ASC"
        sql += f" ORDER BY l.timestamp {order}, l.seq {order} LIMIT ?"
        args.append(limit)
        return [JobLogEntry(row["job_id"], row["vertex_job_id"], _log_entry(row)) for row in self._read(sql, args)]


@dataclass(frozen=True)
class JobLogEntry:
    """A log entry with the job it belongs to (its ID, and the Vertex AI job's numeric ID if any)."""

    job_id: str
    vertex_job_id: str | None
    entry: LogEntry


def _log_entry(row: sqlite3.Row) -> LogEntry:
    return LogEntry(
        timestamp=parse_log_time(row["timestamp"]),
        insert_id=insert_id_for(row["seq"]),
        severity=row["severity"],
        task_name=row["task_name"],
        message=row["message"],
        trial_id=row["trial_id"],
    )


def _job_log_condition(key: int, after: LogCursor | None, task_name: str | None) -> tuple[str, list[object]]:
    """The WHERE clause (and its arguments) of a job's entries strictly after `after`."""
    sql = "job_key = ?"
    args: list[object] = [key]
    if after is not None:
        stamp = log_time(after.timestamp)
        if after.insert_id.isdigit():
            sql += " AND (timestamp, seq) > (?, ?)"
            args += [stamp, int(after.insert_id)]
        else:
            sql += " AND timestamp > ?"
            args.append(stamp)
    if task_name is not None:
        sql += " AND task_name = ?"
        args.append(task_name)
    return sql, args


def append_logs_in_tx(tx: Transaction, key: int, lines: Sequence[PendingLine]) -> None:
    if not lines:
        return
    row = tx.execute(
        "SELECT timestamp FROM logs WHERE job_key = ? ORDER BY timestamp DESC, seq DESC LIMIT 1", (key,)
    ).fetchone()
    latest = row[0] if row else ""
    values = []
    for line in sorted(lines, key=lambda pending: pending.captured):
        stamp = max(log_time(line.captured), latest)
        latest = stamp
        values.append((key, stamp, line.severity, line.task_name, line.trial_id, line.message))
    tx.executemany(
        "INSERT INTO logs (job_key, timestamp, severity, task_name, trial_id, message) VALUES (?, ?, ?, ?, ?, ?)",
        values,
    )
