"""Cloud Logging v2 `entries:list` over the engine's job logs.

Entries look like the ones the service wrote: resource type `ml_job` with `job_id` and
`task_name` labels, the task name repeated in the entry labels, `trial_id` for tuning trials.
For a job created through `customJobs` or `hyperparameterTuningJobs`, `job_id` is its numeric ID
and the task names are Vertex's (`workerpool0-0`). The filter is evaluated in full (see `query`).
Both orders the API knows are served, `timestamp asc` (the default) and `timestamp desc` (what
`gcloud logging read` asks for). A follower's request (one job, ascending) is read from its
cursor: its `job_id` comparison picks the job, and any lower bound on `timestamp` lets the reader
start there instead of the beginning of the log. Any other request (no job named, several jobs,
newest first) reads every named job of the project (all of them when none is named), within the
same scan budget, and pages through the sorted result.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from aiptrain.backends.vertex.translate import vertex_task_name
from aiptrain.emulator.errors import ApiError, invalid_argument
from aiptrain.emulator.query import Filter, FilterError, parse_filter
from aiptrain.emulator.schema import Violation
from aiptrain.emulator.services import Services, decode_token, encode_token
from aiptrain.errors import AiptrainError, NotFound
from aiptrain.job.logs import LogCursor, LogEntry

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
    return {c.value for c in log_filter.comparisons() if c.path == ("resource", "labels", "job_id") and c.op == "="}


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


def _start_cursor(log_filter: Filter, token: dict[str, Any] | None) -> LogCursor | None:
    """Where to start reading: the page token's position, or just before the filter's lower bound."""
    cursor: LogCursor | None = None
    bound = log_filter.lower_bound_ns()
    if bound is not None:
        seconds, nanos = divmod(bound, 1_000_000_000)
        moment = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=nanos // 1000)
        # An empty insert id sorts before every real one: entries at `moment` are all read.
        cursor = LogCursor(moment - timedelta(microseconds=1), "")
    if token is not None:
        from_token = LogCursor(datetime.fromisoformat(str(token["t"])), str(token["i"]))
        cursor = from_token if cursor is None else max(cursor, from_token)
    return cursor


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
    job_labels = _job_labels(log_filter)
    size = min(int(request.get("pageSize") or DEFAULT_PAGE_SIZE), MAX_PAGE_SIZE)
    token = decode_token(str(request["pageToken"])) if request.get("pageToken") else None
    if token is not None and (token.get("f") != filter_text or bool(token.get("d")) != descending):
        raise invalid_argument([Violation("page_token", "The page token belongs to another filter or order.")])
    if len(job_labels) != 1 or descending:
        return _sorted_page(services, project, job_labels, log_filter, size, token,
                            {"f": filter_text, "d": descending})
    job_label = next(iter(job_labels))

    record = services.vertex_job_by_numeric_id(job_label) if job_label.isdigit() else None
    if record is not None and record.project != project:
        record = None
    engine_job_id = record.engine_job_id if record is not None else job_label
    cursor = _start_cursor(log_filter, token)

    entries: list[dict[str, Any]] = []
    scanned = 0
    exhausted = False
    while len(entries) < size and scanned < SCAN_BUDGET:
        try:
            batch = services.engine.logs(project, engine_job_id, after=cursor, limit=READ_BATCH)
        except NotFound:
            return {}  # Cloud Logging has no entries for a job it never heard of
        except AiptrainError as error:
            raise ApiError("UNAVAILABLE", error.message) from None
        for entry in batch:
            scanned += 1
            cursor = entry.cursor
            rendered = render_entry(entry, project=project, job_label=job_label, vertex=record is not None)
            try:
                keep = log_filter.matches(rendered)
            except FilterError as error:
                raise invalid_argument([Violation("filter", str(error))]) from None
            if keep:
                entries.append(rendered)
                if len(entries) >= size:
                    break
        if len(batch) < READ_BATCH and (not batch or cursor == batch[-1].cursor):
            exhausted = True
            break
    response: dict[str, Any] = {}
    if entries:
        response["entries"] = entries
    if not exhausted and cursor is not None:
        response["nextPageToken"] = encode_token({"t": cursor.timestamp.isoformat(), "i": cursor.insert_id,
                                                  "f": filter_text})
    return response


@dataclass(frozen=True)
class _JobLog:
    engine_job_id: str
    label: str  # resource.labels.job_id: the job ID, or a Vertex job's numeric ID
    vertex: bool


def _project_logs(services: Services, project: str, labels: set[str]) -> list[_JobLog]:
    """The logs to read: the jobs named by `labels`, or every job of the project when none is."""
    found: list[_JobLog] = []
    page_token: str | None = None
    try:
        vertex_ids = services.engine.vertex_job_ids(project)
    except AiptrainError as error:
        raise ApiError("UNAVAILABLE", error.message) from None
    while True:
        try:
            jobs, page_token = services.engine.list(project, page_size=1000, page_token=page_token)
        except AiptrainError as error:
            raise ApiError("UNAVAILABLE", error.message) from None
        for job in jobs:
            numeric_id = vertex_ids.get(job.job_id or "")
            log = _JobLog(job.job_id or "", numeric_id or job.job_id or "", numeric_id is not None)
            if not labels or log.label in labels:
                found.append(log)
        if not page_token:
            return found


def _sorted_page(services: Services, project: str, labels: set[str], log_filter: Filter, size: int,
                 token: dict[str, Any] | None, token_base: dict[str, Any]) -> dict[str, Any]:
    """One page of every matching entry of the named jobs, sorted by (timestamp, insertId)."""
    start = _start_cursor(log_filter, None)
    matching: list[dict[str, Any]] = []
    scanned = 0
    for log in _project_logs(services, project, labels):
        cursor = start
        while scanned < SCAN_BUDGET:
            try:
                batch = services.engine.logs(project, log.engine_job_id, after=cursor, limit=READ_BATCH)
            except NotFound:
                break
            except AiptrainError as error:
                raise ApiError("UNAVAILABLE", error.message) from None
            for entry in batch:
                scanned += 1
                rendered = render_entry(entry, project=project, job_label=log.label, vertex=log.vertex)
                try:
                    if log_filter.matches(rendered):
                        matching.append(rendered)
                except FilterError as error:
                    raise invalid_argument([Violation("filter", str(error))]) from None
            if len(batch) < READ_BATCH:
                break
            cursor = batch[-1].cursor
    # Timestamps are fixed-width UTC strings and insert ids zero-padded: text order is time order.
    matching.sort(key=lambda e: (e["timestamp"], e["insertId"]), reverse=bool(token_base["d"]))
    offset = int((token or {}).get("o", 0))
    response: dict[str, Any] = {}
    if matching[offset:offset + size]:
        response["entries"] = matching[offset:offset + size]
    if offset + size < len(matching):
        response["nextPageToken"] = encode_token({**token_base, "o": offset + size})
    return response
