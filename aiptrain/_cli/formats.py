"""The text each `--format` prints (json, yaml, flattened/text, value, csv, table, list, none).

`aiptrain._job.projection` parses the expression and selects the values; this module lays them out
as gcloud does: booleans as True/False, lists joined with the `delimiter` (`;`), a list of
resources in flattened or yaml as documents each opened by `---`, table headings in
ANGRY_SNAKE_CASE, csv headings in lower case.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiptrain._job.projection import Format, Key, project, sort_rows


def render(resources: list[Any], fmt: Format, *, many: bool) -> str:
    """The text for `resources` (one, or a list when `many`), ending in a newline unless empty."""
    rows = sort_rows(resources, fmt) if fmt.keys else list(resources)
    if fmt.name == "none":
        return ""
    if fmt.name == "json":
        return _json(rows, fmt, many=many)
    if fmt.name in ("yaml", ""):
        return _yaml(rows, fmt, many=many)
    return _PER_FORMAT.get(fmt.name, _separated)(rows, fmt, many)


def _json(rows: list[Any], fmt: Format, *, many: bool) -> str:
    shaped = [project(row, fmt.keys) for row in rows] if fmt.keys else rows
    if fmt.attribute("undefined") is False:
        shaped = [_without_nulls(row) for row in shaped]
    # Projected keys are sorted, as gcloud prints them; a whole resource keeps its field order.
    data = shaped if many else (shaped[0] if shaped else None)
    return json.dumps(data, indent=2, sort_keys=bool(fmt.keys)) + "\n"


def dump_yaml(data: Any) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True))


def _yaml(rows: list[Any], fmt: Format, *, many: bool) -> str:
    shaped = [project(row, fmt.keys) for row in rows] if fmt.keys else rows
    if fmt.attribute("undefined") is False:
        shaped = [_without_nulls(row) for row in shaped]
    if fmt.keys:
        shaped = [_sorted(row) for row in shaped]
    if not many:
        return dump_yaml(shaped[0]) if shaped else ""
    return "".join("---\n" + dump_yaml(row) for row in shaped)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    return value


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def cell(value: Any, delimiter: str = ";", scalar: Callable[[str], str] = str) -> str:
    """One value as value() and csv() show it: a list's items and a map's `key=value` entries
    joined with `delimiter`, each scalar passed through `scalar` (csv's quoting) on its own."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return scalar("True" if value else "False")
    if isinstance(value, list):
        return delimiter.join(cell(item, delimiter, scalar) for item in value)
    if isinstance(value, dict):
        return delimiter.join(f"{key}={cell(item, delimiter, scalar)}" for key, item in value.items())
    return scalar(str(value))


def table_cell(value: Any) -> str:
    """A table shows a list or a map as Python writes it (`{'team': 'nlp'}`), as gcloud's tables do."""
    if isinstance(value, (dict, list)):
        return str(value)
    return cell(value)


def _leaves(value: Any, prefix: str) -> list[tuple[str, Any]]:
    """A resource as (dotted key, value) pairs; null fields are left out, as gcloud's flattened does."""
    if isinstance(value, dict) and value:
        pairs = []
        for key, item in value.items():
            pairs += _leaves(item, f"{prefix}.{key}" if prefix else str(key))
        return pairs
    if isinstance(value, list) and value:
        pairs = []
        for index, item in enumerate(value):
            pairs += _leaves(item, f"{prefix}[{index}]")
        return pairs
    return [] if value is None else [(prefix, value)]


def _flattened_all(rows: list[Any], fmt: Format, many: bool) -> str:
    return "".join(("---\n" if many else "") + _flattened(row, fmt) for row in rows)


def _flattened(row: Any, fmt: Format) -> str:
    if fmt.keys:
        # Projected keys are named as csv heads them (jobId: job_id), as gcloud names them.
        headings = [heading.lower() for heading in fmt.headings()]
        pairs = list(zip(headings, (_key_text(k, row) for k in fmt.keys), strict=True))
    else:
        pairs = [(key, cell(value)) for key, value in _leaves(row, "")]
    separator = str(fmt.attribute("separator", ": "))
    pad = fmt.attribute("pad") is not False
    width = max((len(key) for key, _ in pairs), default=0)
    lines = []
    for key, text in pairs:
        label = key + separator.rstrip() if pad else key + separator
        lines.append(f"{label.ljust(width + len(separator.rstrip()))} {text}".rstrip() if pad
                     else f"{label}{text}")
    return "".join(line + "\n" for line in lines)


def _key_text(key: Key, row: Any) -> str:
    value = key.value(row)
    return "None" if value is None else cell(value)


def _list(rows: list[Any], fmt: Format, many: bool) -> str:
    return "".join(_list_item(row, fmt) for row in rows)


def _list_item(row: Any, fmt: Format) -> str:
    if fmt.keys:
        lines = [cell(key.value(row)) for key in fmt.keys]
    elif isinstance(row, dict):
        lines = [f"{key}: {json.dumps(value) if isinstance(value, (dict, list)) else cell(value)}"
                 for key, value in row.items() if value is not None]
    else:
        lines = [cell(row)]
    return "".join((" - " if index == 0 else "   ") + line + "\n" for index, line in enumerate(lines or [""]))


def _table(rows: list[Any], fmt: Format, many: bool) -> str:
    if not rows:
        return ""  # no heading over nothing: the command says "Listed 0 items." on stderr
    cells = [[table_cell(key.value(row)) for key in fmt.keys] for row in rows]
    heading = fmt.attribute("heading") is not False
    headings = fmt.headings()
    lines = [headings] if heading else []
    lines += cells
    widths = [max((len(line[column]) for line in lines), default=0) for column in range(len(fmt.keys))]
    pad = " " * int(str(fmt.attribute("pad", "2")))
    right = [key.attribute("align") == "right" for key in fmt.keys]
    text = []
    title = fmt.attribute("title")
    if isinstance(title, str) and title:
        text.append(title.center(sum(widths) + len(pad) * (len(widths) - 1)).rstrip())
    for line in lines:
        parts = [value.rjust(width) if align else value.ljust(width)
                 for value, width, align in zip(line, widths, right, strict=True)]
        text.append(pad.join(parts).rstrip())
    return "".join(line + "\n" for line in text)


def _separated(rows: list[Any], fmt: Format, many: bool) -> str:
    """value() and csv(): one record per resource, `separator` between fields."""
    is_csv = fmt.name == "csv"
    separator = str(fmt.attribute("separator", "," if is_csv else "\t"))
    terminator = str(fmt.attribute("terminator", "\n"))
    delimiter = str(fmt.attribute("delimiter", ";"))
    quote = is_csv or fmt.attribute("quote") is True
    records = []
    if is_csv and fmt.attribute("heading") is not False:
        # gcloud's csv headings are the table's (jobId: JOB_ID) in lower case.
        records.append([_quoted(h.lower(), separator, quote) for h in fmt.headings()])

    def scalar(text: str) -> str:
        return _quoted(text, separator, quote)

    for row in rows:
        records.append([cell(key.value(row), delimiter, scalar) for key in fmt.keys])
    return "".join(separator.join(record) + terminator for record in records)


def _quoted(text: str, separator: str, quote: bool) -> str:
    """RFC 4180: a field holding the separator, a quote or a line break is quoted, quotes doubled."""
    if quote and any(mark in text for mark in (separator, '"', "\n", "\r")):
        return '"' + text.replace('"', '""') + '"'
    return text


_PER_FORMAT: dict[str, Callable[[list[Any], Format, bool], str]] = {
    "flattened": _flattened_all, "list": _list, "table": _table, "value": _separated, "csv": _separated,
}
