"""Rendering: results on stdout (`--format`, laid out by `formats`), log entries in gcloud's layout or
in `--format`, messages on stderr."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

import click

from aiptrain._cli.terminal_text import for_terminal

if TYPE_CHECKING:
    from aiptrain._job.logs import LogEntry

SEVERITY_COLORS = {
    "DEBUG": "bright_black",
    "INFO": None,
    "NOTICE": "cyan",
    "WARNING": "yellow",
    "ERROR": "red",
    "CRITICAL": "bright_red",
    "ALERT": "bright_red",
    "EMERGENCY": "bright_red",
}


def wants_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def emit(data: Any, output_format: str | None, *, text: str | None = None, many: bool = False,
         default: str | None = None, flatten: tuple[str, ...] = ()) -> None:
    """Print a result on stdout in `--format` (None: the command's `default` format, else `text`
    for humans, else YAML); `many` when `data` is a list of resources; `flatten` as gcloud's
    --flatten (the result is then a list)."""
    from aiptrain._cli.formats import render
    from aiptrain._job.projection import Format, flatten_resources, parse_format

    if flatten:
        data, many, text = flatten_resources(list(data) if many else [data], list(flatten)), True, None
    if output_format is None and default is None:
        if text is not None:
            click.echo(text, nl=not text.endswith("\n"))
            return
        output_format = "yaml"
    base = parse_format(default) if default else Format("yaml")
    fmt = parse_format(output_format).merged_into(base).labelled_like(base) if output_format else base
    resources = list(data) if many else [data]
    click.echo(render(resources, fmt, many=many), nl=False)


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A plain left-aligned table, as gcloud prints lists."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
             for line in [list(headers), *rows]]
    return "\n".join(lines)


def local_time(timestamp: datetime) -> str:
    return timestamp.astimezone().strftime("%Y-%m-%d %H:%M:%S %z")


def format_log_entry(entry: LogEntry, *, color: bool, allow_multiline: bool = False) -> list[str]:
    """gcloud's log layout, one line per message line: SEVERITY  TIMESTAMP  TASK  TRIAL  MESSAGE."""
    severity = entry.severity or "DEFAULT"
    shown = severity
    if color and SEVERITY_COLORS.get(severity):
        shown = click.style(severity, fg=SEVERITY_COLORS[severity])
    # The task, trial and message come from the trainer or the server: their control bytes are shown.
    prefix = (f"{shown}\t{local_time(entry.timestamp)}\t{for_terminal(entry.task_name)}\t"
              f"{for_terminal(entry.trial_id or '')}\t")
    messages = [entry.message] if allow_multiline else (entry.message.split("\n") or [""])
    return [prefix + for_terminal(message, keep_newlines=allow_multiline) for message in messages]


def local_time_text(rfc3339: str | None) -> str:
    """An RFC 3339 time shown in the local zone, as gcloud's tables do."""
    if not rfc3339:
        return ""
    parsed = datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    return parsed.astimezone().strftime("%Y-%m-%dT%H:%M:%S")


def entry_layout(output_format: str | None) -> Callable[[LogEntry], list[str]] | None:
    """How `--format` lays a log entry out: json as one object per line (JSON Lines), other
    formats over the entry's fields; None for gcloud's own layout."""
    if output_format is None:
        return None
    import json

    from aiptrain._cli.formats import render
    from aiptrain._job.projection import parse_format
    from aiptrain.errors import UsageError

    fmt = parse_format(output_format)
    if fmt.name in ("table", ""):
        raise UsageError(f"--format: {fmt.name or 'the default table'} needs every line before it prints, and "
                         "logs are followed", hint="use --format json, value(...) or csv(...)")
    headed = [False]

    def lines(entry: LogEntry) -> list[str]:
        record = {"timestamp": entry.timestamp.isoformat().replace("+00:00", "Z"), "severity": entry.severity,
                  "task": entry.task_name, "message": entry.message}
        if entry.trial_id:
            record["trial"] = entry.trial_id
        if fmt.name == "json" and not fmt.keys:
            return [json.dumps(record)]
        shown = fmt if not headed[0] else type(fmt)(fmt.name, {**fmt.attributes, "heading": False}, fmt.keys)
        headed[0] = True  # a csv heading once, not once per line
        return render([record], shown, many=True).splitlines()

    return lines
