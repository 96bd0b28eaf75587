"""Reading a job's log through Cloud Logging v2 `entries.list`, shared by the REST backends.

The position in a log is a `(timestamp, insertId)` cursor. The lower bound sent to the server is
`((timestamp="T" AND insertId>"ID") OR timestamp>"T")`, so entries sharing a timestamp are never
lost; unlike gcloud there is no upper bound lagging 5 s behind the present. Entries at or before
the cursor are dropped on arrival as well, in case the server's bound is coarser than ours.

Pure helpers (no googleapiclient import); the client is passed in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from aiptrain._backends.mlv1.client import call
from aiptrain._job.logs import LogCursor, LogEntry

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})$"
)
MAX_PAGE_SIZE = 1000


def parse_timestamp(text: str) -> datetime:
    """An RFC 3339 timestamp (up to nanoseconds, any offset) as an aware UTC datetime.

    Digits beyond microseconds are dropped; cursors built from the result stay consistent because
    every comparison on this side uses the same truncation.
    """
    match = _RFC3339.match(text.strip())
    if not match:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micros = int((fraction or "0").ljust(6, "0")[:6])
    iso_offset = "+00:00" if offset in ("Z", "z") else offset
    value = datetime.fromisoformat(
        f"{year}-{month}-{day}T{hour}:{minute}:{second}.{micros:06d}{iso_offset}"
    )
    return value.astimezone(UTC)


def format_timestamp(value: datetime) -> str:
    """`2024-01-02T03:04:05.123456Z`, the form filters compare against."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def quote(value: str) -> str:
    """A filter string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cursor_clause(after: LogCursor) -> str:
    stamp = quote(format_timestamp(after.timestamp))
    return f"((timestamp={stamp} AND insertId>{quote(after.insert_id)}) OR timestamp>{stamp})"


def task_clause(task_name: str) -> str:
    name = quote(task_name)
    return f"(resource.labels.task_name={name} OR labels.task_name={name})"


def job_filter(resource_clause: str, job_id: str, *, after: LogCursor | None, task_name: str | None) -> str:
    """The whole filter for one job's entries after `after`, optionally of one task."""
    clauses = [resource_clause, f"resource.labels.job_id={quote(job_id)}"]
    if after is not None:
        clauses.append(cursor_clause(after))
    if task_name:
        clauses.append(task_clause(task_name))
    return " AND ".join(clauses)


def _message(entry: dict[str, Any]) -> str:
    if "textPayload" in entry:
        return str(entry["textPayload"])
    payload = entry.get("jsonPayload")
    if isinstance(payload, dict):
        return str(payload.get("message", ""))
    return ""


def _task_name(entry: dict[str, Any]) -> str:
    resource_labels = (entry.get("resource") or {}).get("labels") or {}
    labels = entry.get("labels") or {}
    return str(
        resource_labels.get("task_name")
        or labels.get("task_name")
        or labels.get("ml.googleapis.com/task_name")
        or "unknown_task"
    )


def to_log_entry(entry: dict[str, Any], rename_task: Callable[[str], str] | None = None) -> LogEntry:
    labels = entry.get("labels") or {}
    trial = labels.get("trial_id") or labels.get("ml.googleapis.com/trial_id")
    task = _task_name(entry)
    return LogEntry(
        timestamp=parse_timestamp(str(entry.get("timestamp") or entry.get("receiveTimestamp"))),
        insert_id=str(entry.get("insertId", "")),
        severity=str(entry.get("severity") or "DEFAULT"),
        task_name=rename_task(task) if rename_task else task,
        message=_message(entry),
        trial_id=str(trial) if trial else None,
    )


def read_entries(
    logging_client: Any,
    *,
    project: str,
    log_filter: str,
    after: LogCursor | None,
    limit: int,
    what: str,
    rename_task: Callable[[str], str] | None = None,
) -> list[LogEntry]:
    """Up to `limit` entries matching `log_filter`, oldest first, strictly after `after`."""
    entries: list[LogEntry] = []
    page_token: str | None = None
    while len(entries) < limit:
        body: dict[str, Any] = {
            "resourceNames": [f"projects/{project}"],
            "filter": log_filter,
            "orderBy": "timestamp asc",
            "pageSize": min(MAX_PAGE_SIZE, limit - len(entries)),
        }
        if page_token:
            body["pageToken"] = page_token
        response = call(logging_client.entries().list(body=body), what=what, retry=True) or {}
        entries.extend(_newer(response.get("entries") or [], after, rename_task))
        page_token = response.get("nextPageToken")
        if not page_token:
            break
    return entries[:limit]


def _newer(raw: Sequence[dict[str, Any]], after: LogCursor | None,
           rename_task: Callable[[str], str] | None) -> list[LogEntry]:
    parsed = [to_log_entry(item, rename_task) for item in raw]
    if after is None:
        return parsed
    return [entry for entry in parsed if entry.cursor > after]
