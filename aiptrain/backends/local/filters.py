"""The `filter` of ml v1 `jobs.list` (`jobId:census*`, `state:FAILED`, joined with AND) as SQL.

Only conjunctions of simple comparisons are understood; anything else is refused with a hint
rather than silently ignored. Values are always bound parameters, never spliced into SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiptrain.errors import UsageError
from aiptrain.job.spec import JobState

_TERM = re.compile(
    r"""^\s*(?P<field>[A-Za-z][\w.]*)\s*(?P<op>!=|>=|<=|=|:|>|<)\s*(?P<value>"[^"]*"|'[^']*'|\S+)\s*$"""
)
_AND = re.compile(r"\s+AND\s+", re.IGNORECASE)
_SQL_OPS = {"=": "=", ":": "=", "!=": "!=", ">": ">", "<": "<", ">=": ">=", "<=": "<="}
_TIME_FIELDS = {"createTime": "$.createTime", "startTime": "$.startTime", "endTime": "$.endTime"}
_LABEL_KEY = re.compile(r"^[\w-]+$")

HINT = 'write terms like `jobId:census*`, `state:FAILED` or `labels.team=nlp`, joined with AND'


@dataclass(frozen=True)
class SqlFilter:
    where: str
    params: tuple[object, ...]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _glob(pattern: str) -> str:
    # GLOB treats [ and ? specially; the filter language only has `*`.
    return pattern.replace("[", "[[]").replace("?", "[?]")


def _term_sql(field: str, op: str, value: str) -> tuple[str, list[object]]:
    sql_op = _SQL_OPS[op]
    if field == "jobId":
        if "*" in value and op in (":", "="):
            return "job_id GLOB ?", [_glob(value)]
        return f"job_id {sql_op} ?", [value]
    if field == "state":
        try:
            state = JobState(value.upper())
        except ValueError:
            raise UsageError(
                f"unknown job state {value!r} in the filter",
                hint="states are " + ", ".join(s.value for s in JobState),
            ) from None
        if op not in (":", "=", "!="):
            raise UsageError(f"state cannot be compared with {op!r}", hint=HINT)
        return f"state {sql_op} ?", [state.value]
    if field in _TIME_FIELDS:
        return f"json_extract(resource, '{_TIME_FIELDS[field]}') {sql_op} ?", [value]
    if field.startswith("labels."):
        key = field.removeprefix("labels.")
        if not _LABEL_KEY.match(key):
            raise UsageError(f"invalid label key {key!r} in the filter", hint=HINT)
        path = f'$.labels."{key}"'
        if value == "*" and op == ":":
            return "json_extract(resource, ?) IS NOT NULL", [path]
        return f"json_extract(resource, ?) {sql_op} ?", [path, value]
    raise UsageError(
        f"the filter field {field!r} is not supported here",
        hint="filter on jobId, state, createTime, startTime, endTime or labels.KEY",
    )


def compile_filter(text: str | None) -> SqlFilter:
    """Translate a list filter into a WHERE fragment over the jobs table; empty for no filter."""
    if text is None or not text.strip():
        return SqlFilter("", ())
    clauses: list[str] = []
    params: list[object] = []
    for term in _AND.split(text.strip()):
        match = _TERM.match(term)
        if match is None:
            raise UsageError(f"cannot understand the filter term {term.strip()!r}", hint=HINT)
        clause, values = _term_sql(match["field"], match["op"], _unquote(match["value"]))
        clauses.append(clause)
        params.extend(values)
    return SqlFilter(" AND ".join(clauses), tuple(params))
