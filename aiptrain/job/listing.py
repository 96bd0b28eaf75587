"""`jobs list` selection: gcloud-style --filter, --sort-by and --limit applied to Job resources.

The filter language is the subset people use with `gcloud ai-platform jobs list`: terms joined by
AND (or spaces), each `FIELD OP VALUE` with OP one of `=`, `!=`, `:` (glob match, `*` wildcards),
`<`, `<=`, `>`, `>=`; FIELD is a dotted REST path (`jobId`, `state`, `labels.team`,
`trainingInput.scaleTier`, `createTime`). Without --sort-by, jobs stream in the backend's newest-first
order and reading stops at --limit, so a long history costs nothing.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from aiptrain.errors import UsageError
from aiptrain.job.spec import Job

TERM = re.compile(r"^([A-Za-z_][\w.]*)\s*(!=|>=|<=|=|:|<|>)\s*(.*)$")
Predicate = Callable[[dict[str, Any]], bool]


def _lookup(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _term(text: str) -> Predicate:
    match = TERM.match(text.strip())
    if not match:
        raise UsageError(f"cannot read the filter term {text!r}",
                         hint="write FIELD=VALUE, FIELD:PATTERN or FIELD>VALUE, joined by AND")
    field, op, raw = match.groups()
    wanted = raw.strip().strip("\"'")

    def check(data: dict[str, Any]) -> bool:
        value = _lookup(data, field)
        text_value = "" if value is None else str(value)
        if op == "=":
            return text_value == wanted
        if op == "!=":
            return text_value != wanted
        if op == ":":
            return fnmatch.fnmatchcase(text_value.lower(), wanted.lower())
        comparisons = {"<": text_value < wanted, "<=": text_value <= wanted,
                       ">": text_value > wanted, ">=": text_value >= wanted}
        return value is not None and comparisons[op]

    return check


def parse_filter(expression: str | None) -> Predicate:
    if not expression or not expression.strip():
        return lambda _data: True
    if re.search(r"\bOR\b", expression):
        raise UsageError("OR is not supported in --filter", hint="run the list once per alternative")
    terms = [_term(t) for t in re.split(r"\s+AND\s+|\s+(?=[A-Za-z_][\w.]*\s*(?:!=|>=|<=|=|:|<|>))",
                                        expression.strip()) if t.strip()]
    return lambda data: all(term(data) for term in terms)


def _sort_keys(sort_by: str) -> list[tuple[str, bool]]:
    keys = []
    for raw in sort_by.split(","):
        item = raw.strip()
        if item:
            keys.append((item.lstrip("~"), item.startswith("~")))
    return keys


def _sort_key(field: str) -> Callable[[Job], str]:
    return lambda job: str(_lookup(job.to_api(), field) or "")


def select_jobs(jobs: Iterable[Job], *, filter_expr: str | None = None, limit: int | None = None,
                sort_by: str | None = None) -> list[Job]:
    predicate = parse_filter(filter_expr)
    matching: Iterator[Job] = (job for job in jobs if predicate(job.to_api()))
    if not sort_by:
        return list(itertools.islice(matching, limit))
    selected = list(matching)
    for field, descending in reversed(_sort_keys(sort_by)):
        selected.sort(key=_sort_key(field), reverse=descending)
    return selected[:limit] if limit else selected
