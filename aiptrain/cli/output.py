"""Rendering: results on stdout as text, JSON or YAML; log lines and messages on stderr."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

import click

from aiptrain.cli.terminal_text import for_terminal

if TYPE_CHECKING:
    from aiptrain.job.logs import LogEntry

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


def dump_yaml(data: Any) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True))


def emit(data: Any, output_format: str, *, text: str | None = None) -> None:
    """Print a result on stdout: `text` (or YAML) for humans, JSON/YAML for machines."""
    if output_format == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=False))
    elif output_format == "yaml" or text is None:
        click.echo(dump_yaml(data), nl=False)
    else:
        click.echo(text, nl=not text.endswith("\n"))


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
