"""Log capture: each line a replica prints gets its severity (stdout/stderr, JSON, absl, tracebacks).

What a job's log then holds (task names, lifecycle lines, cursors) is in tests/backends/local/test_logs.py."""

from __future__ import annotations

import pytest

from aiptrain._replicas.log_capture import LineClassifier


@pytest.mark.parametrize(
    ("from_stderr", "line", "expected"),
    [
        (False, "hello", ("INFO", "hello")),
        (True, "hello", ("ERROR", "hello")),
        (False, '{"severity": "warning", "message": "careful"}', ("WARNING", "careful")),
        (True, '{"severity": "INFO", "message": "fine"}', ("INFO", "fine")),
        (False, '{"message": "just a message"}', ("INFO", "just a message")),
        (False, '{"severity": "BOGUS"}', ("INFO", '{"severity": "BOGUS"}')),
        (False, "[1, 2]", ("INFO", "[1, 2]")),
        (True, "W0102 03:04:05.000000 1 f.cc:1] absl", ("WARNING", "W0102 03:04:05.000000 1 f.cc:1] absl")),
        (True, "2026-11-24 09:02:01.965629: I tensorflow/core/platform/cpu_feature_guard.cc:182] fast",
         ("INFO", "2026-11-24 09:02:01.965629: I tensorflow/core/platform/cpu_feature_guard.cc:182] fast")),
        (True, "2026-11-24 09:02:10.394291: W tensorflow/core/framework/dataset.cc:959] slow",
         ("WARNING", "2026-11-24 09:02:10.394291: W tensorflow/core/framework/dataset.cc:959] slow")),
        (True, "2026-11-24 09:02:10.394291: looks like a prefix but is not",
         ("ERROR", "2026-11-24 09:02:10.394291: looks like a prefix but is not")),
        (True, "INFO:root:python logging", ("INFO", "INFO:root:python logging")),
    ],
)
def test_line_classification(from_stderr: bool, line: str, expected: tuple[str, str]) -> None:
    assert LineClassifier(from_stderr).classify(line) == expected


def test_traceback_on_stdout_is_error_until_the_exception_line() -> None:
    classifier = LineClassifier(from_stderr=False)
    lines = ["before", "Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
             "    boom()", "ValueError: bad", "after"]
    assert [classifier.classify(line)[0] for line in lines] == ["INFO", "ERROR", "ERROR", "ERROR", "ERROR", "INFO"]
