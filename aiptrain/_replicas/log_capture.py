"""Turning replica output into log entries: one entry per line, with a severity.

Severity follows what Cloud Logging showed for AI Platform replicas, made a little smarter:
- a line that is a JSON object uses its `severity` and `message` fields;
- a line with a glog/absl prefix (`I0102 ...`, `W...`, `E...`, `F...`), TensorFlow's C++ prefix
  (`2024-01-02 03:04:05.678901: I tensorflow/...`) or Python logging's default prefix
  (`INFO:root:...`, `WARNING:...`) takes that level, wherever it was written (TensorFlow writes
  all of its C++ messages, INFO included, to stderr);
- any other stderr line is ERROR; on stdout a Python traceback (the `Traceback (most recent call
  last):` header, its indented frames and the exception line) is ERROR, the rest INFO.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Protocol

from aiptrain._replicas.clock import utc_now

# The task name of the engine's own lines (lifecycle, installs, restarts), next to the replicas'.
SERVICE_TASK = "service"
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
_SEVERITY_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "ERR": "ERROR", "TRACE": "DEBUG"}
_GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d")
_TF_CPP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) ")
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
_PY_LOGGING = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):")
_TRACEBACK_HEADER = "Traceback (most recent call last):"
# Longer lines are split; a runaway line without a newline must not exhaust memory.
MAX_LINE_BYTES = 64 * 1024
# Lines kept per replica for a failed job's errorMessage.
TAIL_LINES = 20


def normalize_severity(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = value.strip().upper()
    name = _SEVERITY_ALIASES.get(name, name)
    return name if name in SEVERITIES else None


@dataclass
class LineClassifier:
    """Severity of successive lines of one stream (it remembers being inside a traceback)."""

    from_stderr: bool
    _in_traceback: bool = False

    def classify(self, line: str) -> tuple[str, str]:
        """(severity, message) of one line."""
        if line.startswith("{"):
            parsed = _json_object(line)
            if parsed is not None:
                severity = normalize_severity(parsed.get("severity"))
                message = parsed.get("message")
                if severity is not None or isinstance(message, str):
                    return (severity or self._default()), (message if isinstance(message, str) else line)
        glog = _GLOG.match(line) or _TF_CPP.match(line)
        if glog:
            return _GLOG_LEVELS[glog.group(1)], line
        logging_prefix = _PY_LOGGING.match(line)
        if logging_prefix:
            return logging_prefix.group(1), line
        if line.startswith(_TRACEBACK_HEADER):
            self._in_traceback = True
            return "ERROR", line
        if self._in_traceback:
            if not line[:1].isspace():
                self._in_traceback = False  # the exception line closes the traceback
            return "ERROR", line
        return self._default(), line

    def _default(self) -> str:
        return "ERROR" if self.from_stderr else "INFO"


def _json_object(line: str) -> dict[str, object] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class LogSink(Protocol):
    """Where replica lines go; `from_stderr` says which of the replica's pipes a line came from."""

    def emit(
        self,
        task_name: str,
        severity: str,
        message: str,
        *,
        trial_id: str | None = None,
        captured: datetime | None = None,
        from_stderr: bool = False,
    ) -> None: ...


@dataclass
class OutputTail:
    """The last lines of one replica, for the errorMessage of a failed job."""

    errors: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    everything: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, severity: str, message: str) -> None:
        with self.lock:
            self.everything.append(message)
            if SEVERITIES.index(severity) >= SEVERITIES.index("ERROR"):
                self.errors.append(message)

    def lines(self) -> list[str]:
        """The last error lines if there were any, else the last lines of all output."""
        with self.lock:
            return list(self.errors or self.everything)

    def clear(self) -> None:
        with self.lock:
            self.errors.clear()
            self.everything.clear()


def pump_stream(
    stream: IO[bytes],
    *,
    task_name: str,
    from_stderr: bool,
    sink: LogSink,
    tail: OutputTail,
    trial_id: str | None = None,
) -> None:
    """Read a replica's pipe to its end, one entry per line (thread target)."""
    classifier = LineClassifier(from_stderr)
    with stream:
        for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
            captured = utc_now()
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            severity, message = classifier.classify(line)
            tail.add(severity, message)
            sink.emit(task_name, severity, message, trial_id=trial_id, captured=captured,
                      from_stderr=from_stderr)


@dataclass
class CallbackSink:
    """A LogSink that hands each entry to a function (used by `local train`)."""

    # (task name, severity, message, whether the replica wrote it to stderr)
    callback: Callable[[str, str, str, bool], None]

    def emit(
        self,
        task_name: str,
        severity: str,
        message: str,
        *,
        trial_id: str | None = None,
        captured: datetime | None = None,
        from_stderr: bool = False,
    ) -> None:
        self.callback(task_name, severity, message, from_stderr)
