"""What the SQLite store can do of a `jobs list` filter (`aiptrain._job.filters`), as a WHERE clause.

Terms on `jobId`, `state`, the times and `labels.KEY` with `=`, `!=`, `:`, `<`, `<=`, `>`, `>=`
(and `(A B)` lists) translate exactly; the rest (regular expressions, other keys) does not, and a
conjunction keeps the parts that do. The clause therefore selects every matching job and maybe
more; the caller applies the whole filter to what the store returns. Values are always bound
parameters, never spliced into SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiptrain._job.filter_syntax import And, Expression, Not, Term
from aiptrain._job.filters import JobFilter

_COLUMNS = {"jobId": "job_id", "state": "state"}
_TIME_FIELDS = ("createTime", "startTime", "endTime")
_LABEL_KEY = re.compile(r"^[\w-]+$")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


@dataclass(frozen=True)
class SqlFilter:
    where: str
    params: tuple[object, ...]


def compile_filter(job_filter: JobFilter) -> SqlFilter:
    """A WHERE fragment over the jobs table selecting a superset of the matches; empty if none."""
    if job_filter.root is None:
        return SqlFilter("", ())
    operands = job_filter.root.operands if isinstance(job_filter.root, And) else (job_filter.root,)
    clauses: list[str] = []
    params: list[object] = []
    for operand in operands:
        exact = _exact(operand)
        if exact is not None:
            clauses.append(exact[0])
            params.extend(exact[1])
    return SqlFilter(" AND ".join(f"({clause})" for clause in clauses), tuple(params))


def _exact(expression: Expression) -> tuple[str, list[object]] | None:
    """SQL true exactly where the expression is (never NULL), or None where SQL cannot say."""
    if isinstance(expression, Term):
        return _term(expression)
    if isinstance(expression, Not):
        inner = _exact(expression.operand)
        return None if inner is None else (f"NOT ({inner[0]})", inner[1])
    parts = [_exact(operand) for operand in expression.operands]
    if any(part is None for part in parts):
        return None
    joiner = " AND " if isinstance(expression, And) else " OR "
    return joiner.join(f"({part[0]})" for part in parts if part), [p for part in parts if part for p in part[1]]


def _column(key: tuple[str, ...]) -> tuple[str, list[object]] | None:
    dotted = ".".join(key)
    if dotted in _COLUMNS:
        return _COLUMNS[dotted], []
    if dotted in _TIME_FIELDS:
        return f"json_extract(resource, '$.{dotted}')", []
    if len(key) == 2 and key[0] == "labels" and _LABEL_KEY.match(key[1]):
        return "json_extract(resource, ?)", [f'$.labels."{key[1]}"']
    return None


def _term(term: Term) -> tuple[str, list[object]] | None:
    column = _column(term.key)
    if column is None or term.operator in ("~", "!~"):
        return None
    expression, column_params = column
    if term.operator == "!=":
        positive = _term(Term(term.key, "=", term.values, term.is_list))
        return None if positive is None else (f"NOT ({positive[0]})", positive[1])
    if term.operator == ":" and term.values == ("*",):
        return f"{expression} IS NOT NULL", column_params
    alternatives: list[str] = []
    params: list[object] = []
    for value in term.values:
        clause, values = _compare(expression, term.operator, value)
        if clause is None:
            return None
        alternatives.append(clause)
        params += [*column_params, *values]
    # COALESCE: a missing field is NULL in SQL, and NOT NULL would drop rows `!=` should keep.
    return "COALESCE(" + " OR ".join(f"({a})" for a in alternatives) + ", 0)", params


def _compare(expression: str, operator: str, value: str) -> tuple[str | None, list[object]]:
    if _NUMBER.match(value) or not value.isascii():
        # Numbers compare as numbers in the filter language, and SQLite folds only ASCII case:
        # both are left to the filter itself.
        return None, []
    if operator == "=":
        return f"{expression} = ? COLLATE NOCASE", [value]
    if operator == ":":
        # `:` contains the text, or matches it whole when it has `*`; LIKE ignores ASCII case too.
        escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        pattern = escaped.replace("*", "%") if "*" in value else f"%{escaped}%"
        return f"{expression} LIKE ? ESCAPE '\\'", [pattern]
    return f"{expression} {operator} ?", [value]
