"""Cloud Logging v2 `entries:list` over the engine's job logs.

Entries look like the ones the service wrote: resource type `ml_job` with `job_id` and
`task_name` labels, the task name repeated in the entry labels, `trial_id` for tuning trials.
For a job created through `customJobs` or `hyperparameterTuningJobs`, `job_id` is its numeric ID
and the task names are Vertex's (`workerpool0-0`). The filter is evaluated in full (see `query`); its `job_id`
comparison picks the job to read, and any lower bound on `timestamp` lets the reader start at the
follower's cursor instead of the beginning of the log. Only `timestamp asc` order is served.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aiptrain.emulator.errors import ApiError, invalid_argument
from aiptrain.emulator.query import Filter, FilterError, parse_filter
from aiptrain.emulator.schema import Violation
from aiptrain.emulator.services import Services, decode_token, encode_token
from aiptrain.errors import AiptrainError, NotFound
from aiptrain.logs import LogCursor, LogEntry
from aiptrain.vertex.translate import vertex_task_name

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
READ_BATCH = 500
# Entries examined per request before answering with what was found and a page token, as the
# real service does on long scans.
SCAN_BUDGET = 50_000
ORDER_ASCENDING = ("", "timestamp", "timestamp asc")


def _project(request: dict[str, Any]) -> str:
    names = [str(n) for n in request.get("resourceNames") or []]
    names += [f"projects/{p}" for p in request.get("projectIds") or []]
    projects = {n.split("/", 1)[1] for n in names if n.startswith("projects/") and n.count("/") == 1}
    if len(projects) != 1:
        raise invalid_argument([Violation("resource_names", "Name exactly one project: projects/PROJECT.")])
    return projects.pop()


def _job_label(log_filter: Filter) -> str:
    values = {c.value for c in log_filter.comparisons()
              if c.path == ("resource", "labels", "job_id") and c.op == "="}
    if len(values) != 1:
        raise invalid_argument([Violation("filter", 'The aiptrain emulator serves one job\'s log at a time: '
                                          'the filter must contain resource.labels.job_id="JOB".')])
    return values.pop()


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


def list_entries(services: Services, body: Any) -> dict[str, Any]:
    request = services.validated("logging", "v2", body, "ListLogEntriesRequest", "")
    if str(request.get("orderBy", "")).strip().lower() not in ORDER_ASCENDING:
        raise invalid_argument([Violation("order_by", "The aiptrain emulator only serves \"timestamp asc\".")])
    project = _project(request)
    filter_text = str(request.get("filter") or "")
    try:
        log_filter = parse_filter(filter_text)
    except FilterError as error:
        raise invalid_argument([Violation("filter", str(error))]) from None
    job_label = _job_label(log_filter)
    size = min(int(request.get("pageSize") or DEFAULT_PAGE_SIZE), MAX_PAGE_SIZE)
    token = decode_token(str(request["pageToken"])) if request.get("pageToken") else None
    if token is not None and token.get("f") != filter_text:
        raise invalid_argument([Violation("page_token", "The page token belongs to another filter.")])

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
