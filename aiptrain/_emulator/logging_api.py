"""Cloud Logging v2 `entries:list` over the engine's job logs.

Entries look like the ones the service wrote: resource type `ml_job` with `job_id` and
`task_name` labels, the task name repeated in the entry labels, `trial_id` for tuning trials.
For a job created through `customJobs` or `hyperparameterTuningJobs`, `job_id` is its numeric ID
and the task names are Vertex's (`workerpool0-0`). The filter is evaluated in full (see `query`).
Both orders the API knows are served, `timestamp asc` (the default) and `timestamp desc` (what
`gcloud logging read` asks for), for one job, several or the whole project (no job named), by
keyset pagination: the page token holds the (timestamp, insertId) of the last entry examined and
the next request continues strictly after it (before it, newest first) over the store's indexes,
so every line is reachable in either order and the newest page costs what the oldest does. Each
request examines at most SCAN_BUDGET entries in batches, keeping only the page it answers, and
then answers with what it found and a page token, as the real service does on long scans; a
lower bound on `timestamp` in the filter starts (or, newest first, ends) the scan there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiptrain._emulator.errors import ApiError, invalid_argument
from aiptrain._emulator.query import Filter, FilterError, parse_filter
from aiptrain._emulator.schema import Violation
from aiptrain._emulator.services import Services, decode_token, encode_token
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.task_names import vertex_task_name
from aiptrain.errors import AiptrainError

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
READ_BATCH = 500
# Entries examined per request before answering with what was found and a page token, as the
# real service does on long scans.
SCAN_BUDGET = 50_000
ORDER_ASCENDING = ("", "timestamp", "timestamp asc")
ORDER_DESCENDING = ("timestamp desc",)


def _project(request: dict[str, Any]) -> str:
    names = [str(n) for n in request.get("resourceNames") or []]
    names += [f"projects/{p}" for p in request.get("projectIds") or []]
    projects = {n.split("/", 1)[1] for n in names if n.startswith("projects/") and n.count("/") == 1}
    if len(projects) != 1:
        raise invalid_argument([Violation("resource_names", "Name exactly one project: projects/PROJECT.")])
    return projects.pop()


def _job_labels(log_filter: Filter) -> set[str]:
    """The jobs the filter names (`resource.labels.job_id="J"`); empty when it names none."""
    return {c.values[0] for c in log_filter.comparisons()
            if c.key == ("resource", "labels", "job_id") and c.operator == "="}


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def render_entry(entry: LogEntry, *, project: str, job_label: str, vertex: bool) -> dict[str, Any]:
    task = vertex_task_name(entry.task_name) if vertex else entry.task_name
    labels = {"task_name": task, "ml.googleapis.com/task_name": task}
    if entry.trial_id:
        labels["trial_id"] = entry.trial_id
        labels["ml.googleapis.com/trial_id"] = entry.trial_id
    stamp = _stamp(entry.timestamp)
    return {
        "logName": f"projects/{project}/logs/{task}",
        "resource": {"type": "ml_job", "labels": {"project_id": project, "job_id": job_label,
                                                   "task_name": task}},
        "timestamp": stamp,
        "receiveTimestamp": stamp,
        "severity": entry.severity or "DEFAULT",
        "insertId": entry.insert_id,
        "labels": labels,
        "textPayload": entry.message,
    }


def _lower_bound(log_filter: Filter) -> datetime | None:
    """An instant every matching entry is at or after (the filter's bound on `timestamp`), or None."""
    bound = log_filter.lower_bound_ns()
    if bound is None:
        return None
    seconds, nanos = divmod(bound, 1_000_000_000)
    # Stored stamps have microseconds: an entry at the bound's microsecond may still match.
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=nanos // 1000)


def _descending(request: dict[str, Any]) -> bool:
    order = " ".join(str(request.get("orderBy", "")).lower().split())
    if order in ORDER_ASCENDING:
        return False
    if order in ORDER_DESCENDING:
        return True
    raise invalid_argument([Violation("order_by", 'Only "timestamp asc" and "timestamp desc" are supported.')])


def list_entries(services: Services, body: Any) -> dict[str, Any]:
    request = services.validated("logging", "v2", body, "ListLogEntriesRequest", "")
    descending = _descending(request)
    project = services.projects.project_id(_project(request))
    filter_text = str(request.get("filter") or "")
    try:
        log_filter = parse_filter(filter_text)
    except FilterError as error:
        raise invalid_argument([Violation("filter", str(error))]) from None
    size = min(int(request.get("pageSize") or DEFAULT_PAGE_SIZE), MAX_PAGE_SIZE)
    token = decode_token(str(request["pageToken"])) if request.get("pageToken") else None
    if token is not None and (token.get("f") != filter_text or bool(token.get("d")) != descending):
        raise invalid_argument([Violation("page_token", "The page token belongs to another filter or order.")])
    cursor = LogCursor(datetime.fromisoformat(str(token["t"])), str(token["i"])) if token is not None else None
    job_ids = _engine_job_ids(services, project, _job_labels(log_filter))
    not_before = _lower_bound(log_filter)

    entries: list[dict[str, Any]] = []
    scanned = 0
    exhausted = False
    while len(entries) < size and scanned < SCAN_BUDGET:
        try:
            batch = services.engine.project_logs(project, job_ids=job_ids, after=cursor, descending=descending,
                                                 not_before=not_before, limit=READ_BATCH)
        except AiptrainError as error:
            raise ApiError("UNAVAILABLE", error.message) from None
        for found in batch:
            scanned += 1
            cursor = found.entry.cursor
            rendered = render_entry(found.entry, project=project, job_label=found.vertex_job_id or found.job_id,
                                    vertex=found.vertex_job_id is not None)
            try:
                keep = log_filter.matches(rendered)
            except FilterError as error:
                raise invalid_argument([Violation("filter", str(error))]) from None
            if keep:
                entries.append(rendered)
                if len(entries) >= size:
                    break
        if len(batch) < READ_BATCH and (not batch or cursor == batch[-1].entry.cursor):
            exhausted = True
            break
    response: dict[str, Any] = {}
    if entries:
        response["entries"] = entries
    if not exhausted and cursor is not None:
        response["nextPageToken"] = encode_token({"t": cursor.timestamp.isoformat(), "i": cursor.insert_id,
                                                  "f": filter_text, "d": descending})
    return response


def _engine_job_ids(services: Services, project: str, labels: set[str]) -> list[str] | None:
    """The engine's IDs of the jobs the filter names (a Vertex job is named by its numeric ID);
    None when it names none (every job of the project)."""
    if not labels:
        return None
    job_ids = set()
    for label in labels:
        record = services.vertex_job_by_numeric_id(label) if label.isdigit() else None
        job_ids.add(record.engine_job_id if record is not None and record.project == project else label)
    return sorted(job_ids)
