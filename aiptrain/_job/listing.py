"""`jobs list` selection: --filter (the language of `job.filters`), --sort-by and --limit applied to
Job resources on the client, as gcloud applies them.

Without --sort-by, jobs stream in the backend's newest-first order and reading stops at --limit,
so a long history costs nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from aiptrain._job.filters import JobFilter, parse_filter
from aiptrain._job.spec import Job


def _lookup(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _sort_keys(sort_by: str) -> list[tuple[str, bool]]:
    keys = []
    for raw in sort_by.split(","):
        item = raw.strip()
        if item:
            keys.append((item.lstrip("~"), item.startswith("~")))
    return keys


def _sort_key(field: str) -> Callable[[Job], str]:
    return lambda job: str(_lookup(job.to_api(), field) or "")


def select_records(records: Iterable[dict[str, Any]], *, job_filter: JobFilter, limit: int | None = None,
                   sort_by: str | None = None) -> list[dict[str, Any]]:
    """--filter, --sort-by and --limit over REST records (what `--flatten` makes of jobs)."""
    selected = [record for record in records if job_filter.matches(record)]
    for field, descending in reversed(_sort_keys(sort_by or "")):
        selected.sort(key=_record_key(field), reverse=descending)
    return selected[:limit] if limit else selected


def _record_key(field: str) -> Callable[[dict[str, Any]], str]:
    return lambda record: str(_lookup(record, field) or "")


def select_jobs(jobs: Iterable[Job], *, filter_expr: str | JobFilter | None = None, limit: int | None = None,
                sort_by: str | None = None) -> list[Job]:
    job_filter = filter_expr if isinstance(filter_expr, JobFilter) else parse_filter(filter_expr)
    matching: Iterator[Job] = (job for job in jobs if job_filter.matches(job.to_api()))
    if not sort_by:
        return list(itertools.islice(matching, limit))
    selected = list(matching)
    for field, descending in reversed(_sort_keys(sort_by)):
        selected.sort(key=_sort_key(field), reverse=descending)
    return selected[:limit] if limit else selected
