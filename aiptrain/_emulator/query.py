"""Filter expressions: the Cloud Logging query language and AIP-160 list filters (a shared subset).

These are the languages of logging v2 `entries.list` and of Vertex AI's `customJobs.list`; they
differ from gcloud's `--filter` (here OR binds tighter than AND, `:` is "has"). ml v1 `jobs.list`
takes gcloud's language, as `jobs list` does: `aiptrain._job.filters`, through the local engine.

    expr       := conjunct (["AND"] conjunct)*        juxtaposition is AND too
    conjunct   := unary ("OR" unary)*                 OR binds tighter than AND, as documented
    unary      := ("NOT" | "-") unary | "(" expr ")" | comparison
    comparison := path op value                        op: = != < <= > >= :
    path       := name ("." name)*                     a name may be quoted: labels."a/b"

A comparison on a missing field is false. Timestamps compare as instants (nanosecond precision),
`severity` by level, everything else as text; `:` means "has" (substring, `*` wildcards allowed).
Parsing never evaluates; `Filter.matches(record)` does, over a JSON-like dict. The tree (a
comparison is a `Term` with one value), and the parse of NOT, AND, OR and parentheses, are
`aiptrain._job.filter_syntax`'s, shared with gcloud's language; the tokens, the comparisons and
their meaning are this module's.
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiptrain._job.filter_syntax import MAX_DEPTH, And, Expression, Or, Term, holds, parse_expression, terms

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
# Cloud Logging's limit on a filter's length (filter_syntax bounds how deep it may nest).
MAX_FILTER_CHARS = 20_000
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
class Filter:
    """A parsed filter; `time_fields` are the dotted paths compared as timestamps."""

    root: Expression | None
    time_fields: frozenset[str] = DEFAULT_TIME_FIELDS

    def matches(self, record: dict[str, Any]) -> bool:
        return self.root is None or holds(self.root, lambda term: _term_holds(term, record, self.time_fields))

    def comparisons(self) -> list[Term]:
        """Every comparison in the filter, wherever it sits."""
        return [] if self.root is None else terms(self.root)

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
    reader = _Tokens(_tokenize(text))
    root = parse_expression(reader, ("OR",))
    leftover = reader.peek()
    if leftover is not None:
        raise FilterError(f"unexpected {leftover[1]!r} in the filter")
    parsed = Filter(root, fields)
    for comparison in parsed.comparisons():  # a bad timestamp is the filter's error, found now
        if ".".join(comparison.key) in fields and comparison.operator != ":":
            timestamp_ns(comparison.values[0])
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


class _Tokens:
    """The filter's tokens, read by `filter_syntax`'s parser (`TermReader`)."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.index = 0

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

    def sequence_ends(self) -> bool:
        token = self.peek()
        return token is None or token[0] == "rparen"

    def keyword(self, word: str) -> bool:
        if self._is_word(word):
            self.take()
            return True
        return False

    def negation(self) -> bool:
        return self.keyword("NOT") or self.keyword("-")

    def opening(self) -> bool:
        token = self.peek()
        if token is not None and token[0] == "lparen":
            self.take()
            return True
        return False

    def closing(self) -> None:
        if self.take()[0] != "rparen":
            raise FilterError("a '(' is not closed in the filter")

    def fail(self, message: str) -> FilterError:
        return FilterError(message)

    def too_deep(self) -> FilterError:
        return FilterError(f"the filter nests NOT, '-' or parentheses more than {MAX_DEPTH} deep")

    def term(self) -> Term:
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
        return Term(path, op, (_unquote(value) if value_kind == "string" else value,))

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


def _term_holds(term: Term, record: dict[str, Any], time_fields: frozenset[str]) -> bool:
    op, value = term.operator, term.values[0]
    actual = _lookup(record, term.key)
    if actual is None:
        return op == "!="  # a missing field differs from every value and matches nothing else
    if op == ":":
        if isinstance(actual, dict):
            return value == "*" or value in actual
        if value == "*":
            return True
        pattern = value if "*" in value else f"*{value}*"
        return fnmatch.fnmatchcase(str(actual).lower(), pattern.lower())
    dotted = ".".join(term.key)
    if dotted in time_fields:
        return _compare(timestamp_ns(str(actual)), timestamp_ns(value), op)
    if dotted == "severity" and value.upper() in SEVERITIES and str(actual) in SEVERITIES:
        return _compare(SEVERITIES.index(str(actual)), SEVERITIES.index(value.upper()), op)
    if op in ("=", "!=") and "*" in value:
        matched = fnmatch.fnmatchcase(str(actual), value)
        return matched if op == "=" else not matched
    return _compare(str(actual), value, op)


def _lower_bound(expr: Expression, field: str) -> int | None:
    if isinstance(expr, Term):
        if ".".join(expr.key) == field and expr.operator in ("=", ">", ">="):
            return timestamp_ns(expr.values[0])
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
