"""The console's parts that need no browser: its session cookie, its markup, log paging, SVG charts,
and the summary reader against event files TensorFlow itself wrote."""

from __future__ import annotations

import bisect
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from aiptrain._backends.local.store import insert_id_for
from aiptrain._emulator.console.html import Html, tag
from aiptrain._emulator.console.job_page import _task_name
from aiptrain._emulator.console.job_view import JobView
from aiptrain._emulator.console.log_pages import LogFilter, cursor_text, page_before, parse_cursor
from aiptrain._emulator.console.summaries import SummaryReader
from aiptrain._emulator.console.svg_charts import TrialPoint, curves_chart, objective_chart
from aiptrain._emulator.tokens import csrf_token, new_session, session_is_valid
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import Job


def test_a_session_cookie_is_signed_by_the_token_and_never_shows_it() -> None:
    session = new_session("the-token")
    assert "the-token" not in session
    assert session_is_valid("the-token", session)
    assert not session_is_valid("another-token", session)
    nonce, _, mac = session.partition(".")
    assert not session_is_valid("the-token", f"{nonce}x.{mac}")
    assert not session_is_valid("the-token", nonce)
    assert csrf_token("the-token", session) != csrf_token("the-token", new_session("the-token"))


def test_markup_escapes_every_value_it_is_given() -> None:
    made = tag("a", "<script>alert(1)</script>", href='x" onclick="evil()', data_job="j&1")
    assert "<script>" not in made and 'onclick="' not in made
    assert 'data-job="j&amp;1"' in made
    assert tag("p", Html("<b>kept</b>")) == "<p><b>kept</b></p>"


def _log(count: int, *, same_time: bool = False) -> list[LogEntry]:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [LogEntry(start if same_time else start + timedelta(milliseconds=i), insert_id_for(i + 1),
                     "ERROR" if i % 97 == 0 else "INFO", "master-replica-0", f"line {i}") for i in range(count)]


def _reader(entries: list[LogEntry]) -> Callable[[LogCursor | None, int], list[LogEntry]]:
    """The store's forward read (entries strictly after a cursor, oldest first) over a list."""
    cursors = [entry.cursor for entry in entries]

    def read(after: LogCursor | None, limit: int) -> list[LogEntry]:
        first = 0 if after is None else bisect.bisect_right(cursors, after)
        return entries[first:first + limit]
    return read


@pytest.mark.parametrize("same_time", [False, True])
def test_a_log_pages_back_from_its_end_without_gaps_or_repeats(same_time: bool) -> None:
    entries = _log(1234, same_time=same_time)
    read = _reader(entries)
    seen: list[str] = []
    before: LogCursor | None = None
    pages = 0
    while True:
        page = page_before(read, before, LogFilter(), lines=100)
        assert 0 < len(page.entries) <= 100
        seen = [entry.message for entry in page.entries] + seen
        pages += 1
        if page.start is None:
            break
        before = page.start
    assert seen == [entry.message for entry in entries]
    assert pages <= 14


def test_a_severity_filter_skips_back_over_pages_it_empties() -> None:
    read = _reader(_log(1000))
    page = page_before(read, None, LogFilter("ERROR"), lines=50)
    assert [entry.message for entry in page.entries] == ["line 970"]
    assert page.end is not None and cursor_text(page.end).endswith(insert_id_for(1000))


def test_a_cursor_survives_its_text() -> None:
    cursor = _log(3)[2].cursor
    assert parse_cursor(cursor_text(cursor)) == cursor
    assert parse_cursor("not a cursor") is None and parse_cursor(None) is None


def test_the_objective_chart_has_one_point_per_trial_and_marks_the_best() -> None:
    points = [TrialPoint("1", 0.2), TrialPoint("2", None), TrialPoint("3", 0.9, best=True), TrialPoint("4", 0.5)]
    chart = objective_chart(points, maximize=True, metric="score")
    assert chart.count('class="trial-point') == 4
    assert chart.count("trial-point best") == 1 and 'data-trial="3"' in chart
    assert "best-so-far" in chart


SUMMARY_WRITER = textwrap.dedent('''
    import sys
    import tensorflow as tf
    root = sys.argv[1]
    with tf.summary.create_file_writer(root + "/logs/train").as_default():
        for step in range(5):
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
    with tf.summary.create_file_writer(root + "/logs/validation").as_default():
        tf.summary.scalar("loss", 0.75, step=4)
    # The TF 1 form: an Event whose Summary has a simple_value, in a TFRecord file.
    tf.io.gfile.makedirs(root + "/v1")
    summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag="accuracy", simple_value=0.5)])
    with tf.io.TFRecordWriter(root + "/v1/events.out.tfevents.1.host") as writer:
        writer.write(tf.compat.v1.Event(wall_time=1.0, step=7, summary=summary).SerializeToString())
''')


@pytest.mark.slow
def test_the_summary_reader_reads_what_tensorflow_writes(tmp_path: Path) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-c", SUMMARY_WRITER, str(tmp_path)], env=env, check=True, timeout=300,
                   capture_output=True)
    reader = SummaryReader()
    curves = reader.curves(tmp_path)
    train = curves["loss"]["logs/train"]
    assert [step for step, _ in train] == list(range(5))
    assert [value for _, value in train] == pytest.approx([1.0 / (s + 1) for s in range(5)])
    assert curves["loss"]["logs/validation"] == [(4, 0.75)]
    assert curves["accuracy"] == {"v1": [(7, 0.5)]}
    # Read again: only what was appended since, and nothing twice.
    assert reader.curves(tmp_path) == curves
    # One line per run of several points, a dot for a run of one.
    chart = curves_chart("loss", curves["loss"])
    assert chart.count("<polyline") == 1 and 'data-run="logs/train"' in chart
    assert chart.count('<circle') == 1 and "logs/validation: 0.75 at step 4" in chart


@pytest.mark.parametrize(("pool_task_names", "shown"), [(True, "(workerpool1-2)"), (False, None)])
def test_a_task_is_worded_by_worker_pool_from_the_jobs_record_not_the_backends_name(
        pool_task_names: bool, shown: str | None) -> None:
    # "vertex" on both: only the record's fact (created as a Vertex AI job) decides the wording.
    view = JobView("p", Job(job_id="j"), "vertex", pool_task_names, "projects/p/jobs/j", {}, [], [], [], [], None, {})
    worded = _task_name(view, "worker-replica-2")
    assert ("<code>worker-replica-2</code>" in worded) and ((shown in worded) if shown else "workerpool" not in worded)
