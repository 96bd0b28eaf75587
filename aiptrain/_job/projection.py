"""gcloud's `--format` expressions: `NAME[ATTRIBUTES](KEY, ...)`, parsed and applied to resources.

    format     := [name] ["[" attribute ("," attribute)* "]"] ["(" key ("," key)* ")"]
    attribute  := ["no-"] word ["=" value]
    key        := path ("." transform "(" [argument ("," argument)*] ")")* (":" word ["=" value])*
    path       := word ("." word | "[" [digits] "]")*

This module knows what a format asks for (`parse_format`) and the value each key selects from a
resource (`Key.value`), as `gcloud topic formats` and `gcloud topic projections` describe them; the
text each format prints is the CLI's business (`aiptrain/_cli/formats.py`). Parsing fails with a
UsageError naming `--format`, before a backend is asked anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from aiptrain._job.text_cursor import TextCursor
from aiptrain._job.transforms import TRANSFORMS, apply_transform
from aiptrain.errors import UsageError

# gcloud's format names (`gcloud topic formats`); `text` and `default` are aliases it documents.
NAMES = ("csv", "default", "disable", "flattened", "get", "json", "list", "none", "table", "text", "value",
         "yaml")
ALIASES = {"text": "flattened", "default": "yaml", "get": "value", "disable": "none"}
# The formats that print nothing without keys to print.
NEEDS_KEYS = ("csv", "table", "value")
_WORD = re.compile(r"[A-Za-z_][\w-]*")
_HINT = "write e.g. --format json, --format 'value(state)' or --format 'table(jobId,state)'; see `gcloud topic formats`"
ALL_ITEMS = "[]"  # a path segment that stands for every item of a list


@dataclass(frozen=True)
class Transform:
    name: str
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Key:
    """One projected key: where its value is, what transforms apply, and its column attributes."""

    path: tuple[str | int, ...]
    transforms: tuple[Transform, ...] = ()
    attributes: tuple[tuple[str, str | bool], ...] = ()

    def attribute(self, name: str) -> str | bool | None:
        return dict(self.attributes).get(name)

    @property
    def names(self) -> list[str]:
        """The path's names, without list indexes: what headings are made of."""
        return [part for part in self.path if isinstance(part, str) and part != ALL_ITEMS]

    def value(self, resource: Any) -> Any:
        value = lookup(resource, self.path)
        for transform in self.transforms:
            value = apply_transform(transform.name, transform.args, dict(transform.kwargs), value)
        return value


@dataclass(frozen=True)
class Format:
    name: str  # a canonical name from NAMES (aliases resolved), "" for "the command's default"
    attributes: dict[str, str | bool] = field(default_factory=dict)
    keys: tuple[Key, ...] = ()

    def attribute(self, name: str, default: str | bool | None = None) -> str | bool | None:
        return self.attributes.get(name, default)

    def merged_into(self, default: Format) -> Format:
        """`--format '[no-heading]'` (no name) changes the command's default format's attributes."""
        if self.name:
            return self
        return Format(default.name, {**default.attributes, **self.attributes}, self.keys or default.keys)

    def labelled_like(self, default: Format) -> Format:
        """Keys without a label take the label the command's default format gives the same key, as in
        gcloud: `jobs list --format 'table(jobId,state)'` heads `state` with STATUS."""
        labels = {key.path: key.attribute("label") for key in default.keys if isinstance(key.attribute("label"), str)}
        keys = tuple(key if key.attribute("label") is not None or key.path not in labels
                     else Key(key.path, key.transforms, (*key.attributes, ("label", str(labels[key.path]))))
                     for key in self.keys)
        return Format(self.name, self.attributes, keys)

    def headings(self) -> list[str]:
        """Column headings: a key's label, else the shortest right-hand part of its path that no
        earlier column uses (`first.name, last.name` -> NAME, LAST_NAME), in ANGRY_SNAKE_CASE
        (csv and flattened use them in lower case)."""
        used: set[str] = set()
        headings = []
        for key in self.keys:
            label = key.attribute("label")
            if isinstance(label, str):
                heading = label
            else:
                names = key.names or ["value"]
                take = 1
                heading = _snake(names[-take:])
                while heading in used and take < len(names):
                    take += 1
                    heading = _snake(names[-take:])
            used.add(heading)
            headings.append(heading)
        return headings


def _snake(names: list[str]) -> str:
    return "_".join(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper() for name in names)


# -- parsing ----------------------------------------------------------------------------------------


class _Reader(TextCursor):
    """A cursor over the format text."""

    def __init__(self, text: str) -> None:
        super().__init__(text, "--format", _HINT)

    def expect(self, char: str) -> None:
        if not self.accept(char):
            found = self.peek()
            raise self.fail(f"expected {char!r}, found {found!r}" if found else f"expected {char!r}")

    def word(self) -> str:
        self.skip_space()
        match = _WORD.match(self.text, self.position)
        if not match:
            raise self.fail("expected a name")
        self.position = match.end()
        return match.group()

    def value(self, stops: str) -> str:
        """A quoted string, or bare text up to one of `stops`."""
        self.skip_space()
        quote = self.peek()
        if quote in ("'", '"'):
            end = self.text.find(quote, self.position + 1)
            if end < 0:
                raise self.fail("a quoted value is not closed")
            value = self.text[self.position + 1:end]
            self.position = end + 1
            return _unescape(value)
        start = self.position
        while self.position < len(self.text) and self.text[self.position] not in stops:
            self.position += 1
        return _unescape(self.text[start:self.position].strip())


def _unescape(value: str) -> str:
    # `separator="\n"` as the shell passes it: gcloud reads \n and \t as the characters.
    return value.replace("\\n", "\n").replace("\\t", "\t")


def parse_format(text: str) -> Format:
    """A `--format` value; UsageError (exit 2) naming what is wrong and where."""
    reader = _Reader(text)
    name = ""
    if reader.peek() not in ("[", "(", ""):
        name = reader.word()
        if name not in NAMES:
            raise UsageError(f"--format: {name!r} is not a format",
                             hint=f"use one of: {', '.join(NAMES)} (see `gcloud topic formats`)")
    attributes = _attributes(reader) if reader.peek() == "[" else {}
    keys = _keys(reader) if reader.peek() == "(" else ()
    if reader.peek():
        raise reader.fail("unexpected text after the format")
    canonical = ALIASES.get(name, name)
    if canonical in NEEDS_KEYS and not keys:
        raise UsageError(f"--format: {name} needs the keys to print, e.g. {name}(jobId,state)", hint=_HINT)
    return Format(canonical, attributes, keys)


def _attributes(reader: _Reader) -> dict[str, str | bool]:
    reader.expect("[")
    attributes: dict[str, str | bool] = {}
    while not reader.accept("]"):
        name = reader.word()
        if reader.accept("="):
            attributes[name] = reader.value(",]")
        elif name.startswith("no-"):
            attributes[name[3:]] = False
        else:
            attributes[name] = True
        if not reader.accept(","):
            reader.expect("]")
            break
    return attributes


def _keys(reader: _Reader) -> tuple[Key, ...]:
    reader.expect("(")
    keys = []
    while not reader.accept(")"):
        keys.append(_key(reader))
        if not reader.accept(","):
            reader.expect(")")
            break
    return tuple(keys)


def _key(reader: _Reader) -> Key:
    path: list[str | int] = [reader.word()]
    transforms: list[Transform] = []
    while True:
        if reader.accept("["):
            index = reader.value("]")
            reader.expect("]")
            if index and not index.isdigit():
                raise reader.fail(f"a list index must be a number, not {index!r}")
            path.append(int(index) if index else ALL_ITEMS)
        elif reader.accept("."):
            name = reader.word()
            if reader.peek() == "(":
                transforms.append(_transform(reader, name))
            elif transforms:
                raise reader.fail("a key cannot go on after a transform")
            else:
                path.append(name)
        else:
            break
    attributes: list[tuple[str, str | bool]] = []
    while reader.accept(":"):
        name = reader.word()
        attributes.append((name, reader.value(",):") if reader.accept("=") else True))
        if name == "sort" and not str(attributes[-1][1]).isdigit():
            raise reader.fail("sort= takes the column's sort rank, a number: :sort=1")
    return Key(tuple(path), tuple(transforms), tuple(attributes))


def _transform(reader: _Reader, name: str) -> Transform:
    if name not in TRANSFORMS:
        raise UsageError(f"--format: unknown transform {name}()",
                         hint=f"aiptrain knows: {', '.join(f'{n}()' for n in TRANSFORMS)}")
    reader.expect("(")
    args: list[str] = []
    kwargs: list[tuple[str, str]] = []
    while not reader.accept(")"):
        argument = reader.value(",)=")
        if reader.accept("="):
            kwargs.append((argument, reader.value(",)")))
        else:
            args.append(argument)
        if not reader.accept(","):
            reader.expect(")")
            break
    return Transform(name, tuple(args), tuple(kwargs))


# -- values -----------------------------------------------------------------------------------------


def lookup(resource: Any, path: tuple[str | int, ...]) -> Any:
    """The value at `path`; None where it leads nowhere. `[]` maps the rest over a list's items."""
    value = resource
    for position, part in enumerate(path):
        if part == ALL_ITEMS:
            if not isinstance(value, list):
                return None
            rest = path[position + 1:]
            return [lookup(item, rest) for item in value]
        if isinstance(part, int):
            value = value[part] if isinstance(value, list) and -len(value) <= part < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
        if value is None:
            return None
    return value


def project(resource: Any, keys: tuple[Key, ...]) -> dict[str, Any]:
    """The resource cut down to `keys` (for json(...)/yaml(...)), nested as in the resource."""
    projected: dict[str, Any] = {}
    for key in keys:
        value = key.value(resource)
        if value is None:
            continue  # absent from the resource: absent from the projection, as gcloud prints it
        names = key.names or ["value"]
        target = projected
        for name in names[:-1]:
            child = target.get(name)
            target = target.setdefault(name, {}) if isinstance(child, dict) or child is None else child
        target[names[-1]] = value
    return projected


def sort_rows(resources: list[Any], fmt: Format) -> list[Any]:
    """Order by the keys that carry `:sort=N` (lowest N first), `:reverse` descending."""
    ordered = sorted(((int(str(k.attribute("sort"))), k) for k in fmt.keys if k.attribute("sort") not in (None, True)),
                     key=lambda pair: pair[0])
    rows = list(resources)
    for _, key in reversed(ordered):  # stable sorts, least significant key first
        values = {id(row): _sortable(key.value(row)) for row in rows}
        rows.sort(key=lambda row: values[id(row)], reverse=bool(key.attribute("reverse")))
    return rows


def _sortable(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value)
    return (2, str(value))


def flatten_resources(resources: list[Any], keys: list[str]) -> list[Any]:
    """gcloud's `--flatten=KEY`: a resource whose KEY is a list becomes one resource per item, with
    that item as KEY (`--flatten trainingOutput.trials`: one row per trial); other resources stay
    as they are. Several keys flatten in turn."""
    for dotted in keys:
        path = tuple(part for part in dotted.replace("[]", "").split(".") if part)
        if not path or not all(_WORD.fullmatch(part) for part in path):
            raise UsageError(f"--flatten: {dotted!r} is not a key", hint="write a dotted key, e.g. "
                             "--flatten trainingOutput.trials")
        flattened: list[Any] = []
        for resource in resources:
            items = lookup(resource, path)
            if not isinstance(items, list) or not items:
                flattened.append(resource)
                continue
            flattened += [_replaced(resource, path, item) for item in items]
        resources = flattened
    return resources


def _replaced(resource: Any, path: tuple[str, ...], item: Any) -> Any:
    if not path or not isinstance(resource, dict):
        return item
    return {**resource, path[0]: _replaced(resource.get(path[0]), path[1:], item)}
