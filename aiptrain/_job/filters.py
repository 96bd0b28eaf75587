"""gcloud's `--filter` language (`gcloud topic filters`), parsed once and evaluated on resources.

    expression := sequence
    sequence   := group (group)*                      juxtaposition is AND, below OR in precedence
    group      := unary (("AND" | "OR") unary)*       AND and OR mixed in one group need parentheses
    unary      := ("NOT" | "-") unary | "(" expression ")" | term
    term       := key operator (value | "(" value ([","] value)* ")")
    operator   := ":" | "=" | "!=" | "<" | "<=" | ">" | ">=" | "~" | "!~"
    key        := name ("." name)*                    a name may be quoted: labels."a.b"

Matching follows gcloud as it behaves today: `=` is equality ignoring case (no wildcards), `:` is
"contains" ignoring case, or a whole-value match when the pattern has `*`, and `key:*` means the
key is set; `<`, `>`, `<=`, `>=` compare numbers as numbers and anything else as text (RFC 3339
times therefore in time order); `~` is a Python regular expression searched in the value. A list
`(A B)` after `=` or `:` matches any of its values. A key a resource does not have matches only
`!=` and `!~`. Used by `jobs list` on every backend and by the emulator's ml v1 `jobs.list`; the
local store turns what it can of a parsed filter into SQL (`backends/local/filters.py`). The tree,
and the parse of NOT, AND, OR and parentheses, are `filter_syntax`'s (the emulator's Cloud Logging
language shares them); the words, the terms and their meaning are this module's.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from aiptrain._job.filter_syntax import MAX_DEPTH, Expression, Term, holds, parse_expression
from aiptrain._job.state import JobState
from aiptrain._job.text_cursor import TextCursor
from aiptrain.errors import UsageError

OPERATORS = ("!=", "!~", "<=", ">=", ":", "=", "<", ">", "~")
LIST_OPERATORS = (":", "=", "!=")
# Bounds on what a filter may be, so a hostile one (the emulator parses them too) costs little.
MAX_FILTER_CHARS = 20_000
HINT = ("write terms like state=FAILED, jobId:census*, labels.team=nlp or createTime>2024-01-01, joined "
        "with AND, OR, NOT (see `gcloud topic filters`)")
_NAME = re.compile(r"[A-Za-z_][\w-]*")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


@dataclass(frozen=True)
class JobFilter:
    """A parsed filter; `root` is None for an empty one, which matches everything."""

    root: Expression | None

    def matches(self, resource: dict[str, Any]) -> bool:
        return self.root is None or evaluate(self.root, resource)


# -- parsing ----------------------------------------------------------------------------------------


class _Reader(TextCursor):
    def __init__(self, text: str, source: str) -> None:
        super().__init__(text, source, HINT)

    def at_end(self) -> bool:
        self.skip_space()
        return self.position >= len(self.text)

    def sequence_ends(self) -> bool:
        return self.at_end() or self.peek() == ")"

    def negation(self) -> bool:
        return self.keyword("NOT") or self.accept("-")

    def opening(self) -> bool:
        return self.accept("(")

    def closing(self) -> None:
        if not self.accept(")"):
            raise self.fail("a '(' is not closed")

    def term(self) -> Term:
        return _term(self)

    def too_deep(self) -> UsageError:
        return self.fail(f"NOT, '-' and parentheses nest more than {MAX_DEPTH} deep")

    def keyword(self, word: str) -> bool:
        """`word` as a whole word (AND, OR, NOT are upper case only, as in gcloud)."""
        self.skip_space()
        end = self.position + len(word)
        if self.text[self.position:end] == word and (end == len(self.text) or self.text[end].isspace()
                                                       or self.text[end] == "("):
            self.position = end
            return True
        return False

    def quoted(self) -> str:
        quote = self.text[self.position]
        self.position += 1
        chars = []
        while self.position < len(self.text) and self.text[self.position] != quote:
            if self.text[self.position] == "\\" and self.position + 1 < len(self.text):
                self.position += 1
            chars.append(self.text[self.position])
            self.position += 1
        if self.position >= len(self.text):
            raise self.fail("a quoted string is not closed")
        self.position += 1
        return "".join(chars)

    def bare(self, stops: str) -> str:
        start = self.position
        while self.position < len(self.text) and not self.text[self.position].isspace() \
                and self.text[self.position] not in stops:
            self.position += 1
        return self.text[start:self.position]


def parse_filter(text: str | None, *, source: str = "--filter") -> JobFilter:
    """A filter expression; UsageError (exit 2) naming `source` and where the text went wrong."""
    if text is None or not text.strip():
        return JobFilter(None)
    if len(text) > MAX_FILTER_CHARS:
        raise UsageError(f"{source}: the filter is {len(text)} characters long; at most {MAX_FILTER_CHARS}",
                         hint=HINT)
    reader = _Reader(text, source)
    root = parse_expression(reader, ("AND", "OR"))
    if not reader.at_end():
        raise reader.fail("unexpected ')'" if reader.peek() == ")" else "unexpected text")
    return JobFilter(root)


def _term(reader: _Reader) -> Term:
    if reader.at_end():
        raise reader.fail("a term is missing")
    key = _key(reader)
    operator = next((op for op in OPERATORS if reader.accept(op)), "")
    if not operator:
        raise reader.fail(f"expected an operator ({' '.join(OPERATORS)}) after {'.'.join(key)}")
    if reader.accept("("):
        if operator not in LIST_OPERATORS:
            raise reader.fail(f"a list of values can follow {', '.join(LIST_OPERATORS)}, not {operator}")
        values = []
        while not reader.accept(")"):
            if reader.at_end():
                raise reader.fail("the list of values is not closed with ')'")
            values.append(_value(reader))
            reader.accept(",")
        if not values:
            raise reader.fail("the list of values is empty")
        return _checked(reader, Term(key, operator, tuple(values), is_list=True))
    if reader.at_end() or reader.peek() == ")":
        raise reader.fail(f"a value is missing after {'.'.join(key)}{operator}")
    return _checked(reader, Term(key, operator, (_value(reader),)))


def _checked(reader: _Reader, term: Term) -> Term:
    if term.key == ("state",) and term.operator in ("=", "!="):
        # A misspelt state would match nothing without a word; gcloud only warned.
        states = {state.value for state in JobState}
        for value in term.values:
            if value.upper() not in states:
                raise UsageError(f"{reader.source}: {value!r} is not a job state",
                                 hint="states are " + ", ".join(sorted(states)))
    if term.operator in ("~", "!~"):
        try:
            re.compile(term.values[0])
        except re.error as error:
            raise reader.fail(f"{term.values[0]!r} is not a regular expression: {error}") from None
    return term


def _key(reader: _Reader) -> tuple[str, ...]:
    parts: list[str] = []
    reader.skip_space()
    while True:
        if reader.position < len(reader.text) and reader.text[reader.position] in "\"'":
            parts.append(reader.quoted())
        else:
            match = _NAME.match(reader.text, reader.position)
            if not match:
                raise reader.fail("expected a key such as state, jobId or labels.team")
            reader.position = match.end()
            parts.append(match.group())
        if reader.position < len(reader.text) and reader.text[reader.position] == ".":
            reader.position += 1
            continue
        return tuple(parts)


def _value(reader: _Reader) -> str:
    reader.skip_space()
    if reader.text[reader.position] in "\"'":
        return reader.quoted()
    return reader.bare("(),")


# -- evaluation -------------------------------------------------------------------------------------


def lookup(resource: Any, key: tuple[str, ...]) -> Any:
    value = resource
    for part in key:
        if isinstance(value, list):  # a key into a list looks into each item
            found = [lookup(item, (part,)) for item in value]
            value = [item for item in found if item is not None] or None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
        if value is None:
            return None
    return value


def evaluate(expression: Expression, resource: dict[str, Any]) -> bool:
    return holds(expression, lambda term: _term_matches(term, lookup(resource, term.key)))


def _term_matches(term: Term, actual: Any) -> bool:
    if term.operator in ("!=", "!~"):
        positive = Term(term.key, "=" if term.operator == "!=" else "~", term.values, term.is_list)
        return not _term_matches(positive, actual)
    if actual is None or actual in ([], {}):
        return False
    if term.operator == ":" and term.values == ("*",):
        return True
    items = list(actual.items()) if isinstance(actual, dict) else actual if isinstance(actual, list) else [actual]
    return any(_matches_one(term.operator, value, item) for value in term.values for item in items)


def _matches_one(operator: str, wanted: str, item: Any) -> bool:
    if isinstance(item, tuple):  # a map's entry: its key or its value may match
        return _matches_one(operator, wanted, item[0]) or _matches_one(operator, wanted, item[1])
    if isinstance(item, (dict, list)):
        return False
    text = _text(item)
    if operator == ":":
        if "*" in wanted:
            return fnmatch.fnmatchcase(text.lower(), _glob(wanted.lower()))
        return wanted.lower() in text.lower()
    if operator == "~":
        return re.search(wanted, text) is not None
    return _ordered(operator, text, wanted)


def _glob(pattern: str) -> str:
    """Only `*` is a wildcard in the filter language; `?` and `[` are matched as themselves."""
    return pattern.replace("[", "[[]").replace("?", "[?]")


def _ordered(operator: str, text: str, wanted: str) -> bool:
    """`=` and the orderings: numbers as numbers; other text as text, `=` ignoring case."""
    left: Any = text
    right: Any = wanted
    if _NUMBER.match(text) and _NUMBER.match(wanted):
        left, right = float(text), float(wanted)
    elif operator == "=":
        return text.lower() == wanted.lower()
    if operator == "=":
        return bool(left == right)
    if operator == "<":
        return bool(left < right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">":
        return bool(left > right)
    return bool(left >= right)


def _text(item: Any) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    return str(item)
