"""Filter expressions: the Cloud Logging query language and AIP-160 list filters (a shared subset).

These are the languages of logging v2 `entries.list` and of Vertex AI's `customJobs.list`; they
differ from gcloud's `--filter` (here OR binds tighter than AND, `:` is "has"). ml v1 `jobs.list`
takes gcloud's language, as `jobs list` does: `aiptrain.job.filters`, through the local engine.

    expr       := conjunct (["AND"] conjunct)*        juxtaposition is AND too
    conjunct   := unary ("OR" unary)*                 OR binds tighter than AND, as documented
    unary      := ("NOT" | "-") unary | "(" expr ")" | comparison
    comparison := path op value                        op: = != < <= > >= :
    path       := name ("." name)*                     a name may be quoted: labels."a/b"

A comparison on a missing field is false. Timestamps compare as instants (nanosecond precision),
`severity` by level, everything else as text; `:` means "has" (substring, `*` wildcards allowed).
Parsing never evaluates; `Expression.matches(record)` does, over a JSON-like dict.
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<lparen>\() | (?P<rparen>\)) |
        (?P<op>!=|>=|<=|=|<|>|:) |
        (?P<string>"(?:[^"\\]|\\.)*") |
        (?P<word>[^\s()"=<>!:]+)
    )""",
    re.VERBOSE,
)
DEFAULT_TIME_FIELDS = frozenset({"timestamp", "receiveTimestamp"})
_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:\d{2})\Z"
)
# Cloud Logging's limit on a filter's length; the nesting cap keeps the parser's recursion bounded.
MAX_FILTER_CHARS = 20_000
MAX_FILTER_DEPTH = 64
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


class FilterError(ValueError):
    """The filter is not valid (or uses something this emulator does not understand)."""


def timestamp_ns(text: str) -> int:
    """An RFC 3339 timestamp as integer nanoseconds since the epoch (exact, no float rounding)."""
    match = _RFC3339.match(text.strip())
    if not match:
        raise FilterError(f"not an RFC 3339 timestamp: {text!r}")
    date, clock, fraction, offset = match.groups()
    try:
        moment = datetime.fromisoformat(f"{date}T{clock}{'+00:00' if offset in ('Z', 'z') else offset}")
    except ValueError:  # the right shape, but no such date or time (month 13, 25:00, ...)
        raise FilterError(f"not a valid date and time: {text!r}") from None
    seconds = int(moment.astimezone(UTC).timestamp())
    return seconds * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))


@dataclass(frozen=True)
class Comparison:
    path: tuple[str, ...]
    op: str
    value: str


@dataclass(frozen=True)
class Not:
    operand: Expression


@dataclass(frozen=True)
class And:
    operands: tuple[Expression, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Expression, ...]


Expression = Comparison | Not | And | Or


@dataclass(frozen=True)
class Filter:
    """A parsed filter; `time_fields` are the dotted paths compared as timestamps."""

    root: Expression | None
    time_fields: frozenset[str] = DEFAULT_TIME_FIELDS

    def matches(self, record: dict[str, Any]) -> bool:
        return self.root is None or _evaluate(self.root, record, self.time_fields)

    def comparisons(self) -> list[Comparison]:
        """Every comparison in the filter, wherever it sits."""
        found: list[Comparison] = []
        if self.root is not None:
            _collect(self.root, found)
        return found

    def lower_bound_ns(self, field: str = "timestamp") -> int | None:
        """An instant every matching record's `field` is at or after, or None if none is implied.

        Lets a reader skip what the filter rules out anyway (the log cursor of a follower).
        """
        return None if self.root is None else _lower_bound(self.root, field)


def parse_filter(text: str | None, *, time_fields: frozenset[str] | None = None) -> Filter:
    fields = time_fields if time_fields is not None else DEFAULT_TIME_FIELDS
    if text is None or not text.strip():
        return Filter(None, fields)
    if len(text) > MAX_FILTER_CHARS:
        raise FilterError(f"the filter is {len(text)} characters long; at most {MAX_FILTER_CHARS} are allowed")
    parser = _Parser(_tokenize(text))
    root = parser.expression()
    leftover = parser.peek()
    if leftover is not None:
        raise FilterError(f"unexpected {leftover[1]!r} in the filter")
    parsed = Filter(root, fields)
    for comparison in parsed.comparisons():  # a bad timestamp is the filter's error, found now
        if ".".join(comparison.path) in fields and comparison.op != ":":
            timestamp_ns(comparison.value)
    return parsed


# -- parsing ----------------------------------------------------------------------------------


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise FilterError(f"cannot read the filter at {text[position:position + 20]!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise FilterError("the filter ends too early")
        self.index += 1
        return token

    def _is_word(self, word: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "word" and token[1] == word

    def expression(self) -> Expression:
        operands = [self.conjunct()]
        while True:
            token = self.peek()
            if token is None or token[0] == "rparen":
                break
            if self._is_word("AND"):
                self.take()
            operands.append(self.conjunct())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def conjunct(self) -> Expression:
        operands = [self.unary()]
        while self._is_word("OR"):
            self.take()
            operands.append(self.unary())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def unary(self) -> Expression:
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise FilterError(f"the filter nests NOT, '-' or parentheses more than {MAX_FILTER_DEPTH} deep")
        try:
            return self._unary()
        finally:
            self.depth -= 1

    def _unary(self) -> Expression:
        if self._is_word("NOT"):
            self.take()
            return Not(self.unary())
        token = self.peek()
        if token is not None and token[0] == "word" and token[1] == "-":
            self.take()
            return Not(self.unary())
        if token is not None and token[0] == "lparen":
            self.take()
            inner = self.expression()
            if self.take()[0] != "rparen":
                raise FilterError("a '(' is not closed in the filter")
            return inner
        return self.comparison()

    def comparison(self) -> Comparison:
        kind, text = self.take()
        if kind not in ("word", "string"):
            raise FilterError(f"expected a field name, got {text!r}")
        path = self._path(text if kind == "word" else _unquote(text), quoted=kind == "string")
        op_kind, op = self.take()
        if op_kind != "op":
            raise FilterError(f"expected a comparison after {'.'.join(path)!r}, got {op!r}")
        value_kind, value = self.take()
        if value_kind not in ("word", "string"):
            raise FilterError(f"expected a value after {'.'.join(path)}{op}, got {value!r}")
        return Comparison(path, op, _unquote(value) if value_kind == "string" else value)

    def _path(self, first: str, *, quoted: bool) -> tuple[str, ...]:
        # A bare word like `resource.labels.job_id` is a dotted path; `labels."a.b/c"` is two
        # tokens (`labels.` then a quoted segment), glued back together here.
        parts = [first] if quoted else [p for p in first.split(".") if p]
        while not quoted and first.endswith("."):
            kind, text = self.take()
            segment = _unquote(text) if kind == "string" else text
            parts.append(segment)
            first = text if kind == "word" else ""
        return tuple(parts)


# -- evaluation ---------------------------------------------------------------------------------


def _lookup(record: Any, path: tuple[str, ...]) -> Any:
    current = record
    for part in path:
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _compare(left: Any, right: Any, op: str) -> bool:
    return _OPERATORS[op](left, right)


def _evaluate(expr: Expression, record: dict[str, Any], time_fields: frozenset[str]) -> bool:
    if isinstance(expr, And):
        return all(_evaluate(e, record, time_fields) for e in expr.operands)
    if isinstance(expr, Or):
        return any(_evaluate(e, record, time_fields) for e in expr.operands)
    if isinstance(expr, Not):
        return not _evaluate(expr.operand, record, time_fields)
    actual = _lookup(record, expr.path)
    if actual is None:
        return expr.op == "!="  # a missing field differs from every value and matches nothing else
    if expr.op == ":":
        if isinstance(actual, dict):
            return expr.value == "*" or expr.value in actual
        if expr.value == "*":
            return True
        pattern = expr.value if "*" in expr.value else f"*{expr.value}*"
        return fnmatch.fnmatchcase(str(actual).lower(), pattern.lower())
    dotted = ".".join(expr.path)
    if dotted in time_fields:
        return _compare(timestamp_ns(str(actual)), timestamp_ns(expr.value), expr.op)
    if dotted == "severity" and expr.value.upper() in SEVERITIES and str(actual) in SEVERITIES:
        return _compare(SEVERITIES.index(str(actual)), SEVERITIES.index(expr.value.upper()), expr.op)
    if expr.op in ("=", "!=") and "*" in expr.value:
        matched = fnmatch.fnmatchcase(str(actual), expr.value)
        return matched if expr.op == "=" else not matched
    return _compare(str(actual), expr.value, expr.op)


def _collect(expr: Expression, found: list[Comparison]) -> None:
    if isinstance(expr, Comparison):
        found.append(expr)
    elif isinstance(expr, Not):
        _collect(expr.operand, found)
    else:
        for operand in expr.operands:
            _collect(operand, found)


def _lower_bound(expr: Expression, field: str) -> int | None:
    if isinstance(expr, Comparison):
        if ".".join(expr.path) == field and expr.op in ("=", ">", ">="):
            return timestamp_ns(expr.value)
        return None
    if isinstance(expr, And):
        bounds = [b for b in (_lower_bound(e, field) for e in expr.operands) if b is not None]
        return max(bounds) if bounds else None
    if isinstance(expr, Or):
        alternatives = [_lower_bound(e, field) for e in expr.operands]
        known = [b for b in alternatives if b is not None]
        # Every alternative must bound the field, or one of them lets earlier records through.
        return min(known) if len(known) == len(alternatives) else None
    return None  # NOT implies no lower bound
