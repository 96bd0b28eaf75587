"""The syntax tree of the filter languages, and the parser of the grammar they share.

Two filter languages are read here: gcloud's `--filter` (`job/filters.py`: `jobs list` on every
backend, the emulator's ml v1 `jobs.list`) and the Cloud Logging / AIP-160 language
(`emulator/query.py`: logging v2 `entries.list`, Vertex AI's `customJobs.list`). Both join terms
with NOT, `-`, AND, OR, juxtaposition and parentheses into the same tree:

    sequence := group (["AND"] group)*          juxtaposition is AND, below the group's joiner
    group    := unary (JOINER unary)*           gcloud: AND or OR, one of them per group;
                                                Cloud Logging: OR only (it binds tighter than AND)
    unary    := NEGATION unary | "(" sequence ")" | term

They differ in how their text is cut into words, in what a term may hold and in what it means,
so each language brings its own reader (`TermReader`) and its own evaluation of a term; the tree,
the precedence, the nesting bound and the walk of AND, OR and NOT are this module's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

# Bounds what a filter may nest, so a hostile one (the emulator parses them) cannot exhaust the stack.
MAX_DEPTH = 64


@dataclass(frozen=True)
class Term:
    """`key operator value`: the key's dotted path, and one value or the items of a `(A B)` list."""

    key: tuple[str, ...]
    operator: str
    values: tuple[str, ...]
    is_list: bool = False


@dataclass(frozen=True)
class Not:
    operand: Expression


@dataclass(frozen=True)
class And:
    operands: tuple[Expression, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Expression, ...]


Expression = Term | Not | And | Or


class TermReader(Protocol):
    """One language's reading of its text: its words, its terms and its own error messages."""

    def sequence_ends(self) -> bool:
        """True at the end of the text or before a ')'."""

    def keyword(self, word: str) -> bool:
        """Step over `word` (AND, OR) if it comes next as a word of its own."""

    def negation(self) -> bool:
        """Step over NOT or '-' if one comes next."""

    def opening(self) -> bool:
        """Step over '(' if it comes next."""

    def closing(self) -> None:
        """Step over the ')' of a group; raise the language's error when it is not there."""

    def term(self) -> Term:
        """Read a term; raise the language's error when the text holds none."""

    def fail(self, message: str) -> Exception:
        """The language's error for `message`, where the reader stands."""

    def too_deep(self) -> Exception:
        """The language's error for nesting deeper than MAX_DEPTH."""


def parse_expression(reader: TermReader, joiners: tuple[str, ...]) -> Expression:
    """The expression at the reader's position, up to the end of the text or an unmatched ')'.

    `joiners` are the keywords that join the unaries of a group, tried in order; AND between two
    groups is optional (juxtaposition means the same).
    """
    return _Parser(reader, joiners).sequence()


class _Parser:
    def __init__(self, reader: TermReader, joiners: tuple[str, ...]) -> None:
        self.reader = reader
        self.joiners = joiners
        self.depth = 0

    def sequence(self) -> Expression:
        groups = [self.group()]
        while not self.reader.sequence_ends():
            # Where AND joins groups (it is not a joiner of the language's groups), it may be written.
            self.reader.keyword("AND")
            groups.append(self.group())
        return groups[0] if len(groups) == 1 else And(tuple(groups))

    def group(self) -> Expression:
        operands = [self.unary()]
        joiner = ""
        while True:
            word = next((candidate for candidate in self.joiners if self.reader.keyword(candidate)), "")
            if not word:
                break
            if joiner and word != joiner:
                raise self.reader.fail("parentheses are required when AND and OR are combined")
            joiner = word
            operands.append(self.unary())
        if len(operands) == 1:
            return operands[0]
        return And(tuple(operands)) if joiner == "AND" else Or(tuple(operands))

    def unary(self) -> Expression:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.reader.too_deep()
        try:
            if self.reader.negation():
                return Not(self.unary())
            if self.reader.opening():
                inner = self.sequence()
                self.reader.closing()
                return inner
            return self.reader.term()
        finally:
            self.depth -= 1


def holds(expression: Expression, term_holds: Callable[[Term], bool]) -> bool:
    """Whether the expression is true, given what each of its terms says (`term_holds`)."""
    if isinstance(expression, And):
        return all(holds(operand, term_holds) for operand in expression.operands)
    if isinstance(expression, Or):
        return any(holds(operand, term_holds) for operand in expression.operands)
    if isinstance(expression, Not):
        return not holds(expression.operand, term_holds)
    return term_holds(expression)


def terms(expression: Expression) -> list[Term]:
    """Every term of the expression, wherever it sits, in text order."""
    if isinstance(expression, Term):
        return [expression]
    if isinstance(expression, Not):
        return terms(expression.operand)
    return [term for operand in expression.operands for term in terms(operand)]
