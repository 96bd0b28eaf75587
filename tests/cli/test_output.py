"""Rendering helpers: gcloud's log layout, tables, the upload progress bar."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from aiptrain._cli.output import format_log_entry, table
from aiptrain._cli.progress import progress_bar_factory
from aiptrain._job.logs import LogEntry

ENTRY = LogEntry(timestamp=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), insert_id="0001", severity="ERROR",
                 task_name="worker-replica-1", message="Traceback:\n  boom", trial_id="3")


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("utc")
def test_log_lines_follow_gclouds_columns_one_per_message_line() -> None:
    lines = format_log_entry(ENTRY, color=False)
    assert lines == ["ERROR\t2024-01-02 03:04:05 +0000\tworker-replica-1\t3\tTraceback:",
                     "ERROR\t2024-01-02 03:04:05 +0000\tworker-replica-1\t3\t  boom"]
    assert format_log_entry(ENTRY, color=False, allow_multiline=True)[0].endswith("Traceback:\n  boom")


def test_severity_is_coloured_only_when_asked() -> None:
    coloured = format_log_entry(ENTRY, color=True)[0]
    assert coloured.startswith("\x1b[31mERROR\x1b[0m\t")
    info = LogEntry(ENTRY.timestamp, "2", "INFO", "master-replica-0", "hi")
    assert format_log_entry(info, color=True)[0].startswith("INFO\t")


def test_table_aligns_columns() -> None:
    assert table([["a", "SUCCEEDED"], ["long_job", "FAILED"]], ["JOB_ID", "STATUS"]).splitlines() == [
        "JOB_ID    STATUS", "a         SUCCEEDED", "long_job  FAILED"]


def test_progress_bar_draws_in_place_and_ends_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    draw = progress_bar_factory("trainer.tar.gz", 200)
    draw(100, 200)
    draw(200, 200)
    err = capsys.readouterr().err
    assert err.count("\r") == 2
    assert " 50%" in err and "100%" in err
    assert err.endswith("\n")
