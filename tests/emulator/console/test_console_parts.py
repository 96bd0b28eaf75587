"""The console's parts that need no browser: its session cookie, its markup, log paging, SVG charts,
and the summary reader against event files TensorFlow itself wrote."""

from __future__ import annotations

import bisect
import math
import os
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from aiptrain._backends.local.store import insert_id_for
from aiptrain._emulator.console.html import Html, tag
from aiptrain._emulator.console.job_page import _task_name
from aiptrain._emulator.console.job_view import JobView
from aiptrain._emulator.console.log_pages import LogFilter, cursor_text, page_before, parse_cursor
from aiptrain._emulator.console.login import ConsoleLogin
from aiptrain._emulator.console.summaries import SummaryReader
from aiptrain._emulator.console.svg_charts import TrialPoint, curves_chart, drawn, objective_chart
from aiptrain._emulator.tokens import (
    RENEW_AFTER_SECONDS,
    SESSION_SECONDS,
    csrf_token,
    new_session,
    valid_session,
)
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import Job


def test_a_session_cookie_is_signed_by_the_token_and_never_shows_it() -> None:
    session = new_session("the-token", 8080)
    assert "the-token" not in session
    assert valid_session("the-token", session, 8080) is not None
    assert valid_session("another-token", session, 8080) is None
    nonce, expiry, mac = session.split(".")
    assert valid_session("the-token", f"{nonce}x.{expiry}.{mac}", 8080) is None
    assert valid_session("the-token", f"{nonce}.{int(expiry) + 9999}.{mac}", 8080) is None
    assert valid_session("the-token", nonce, 8080) is None
    assert csrf_token("the-token", nonce) != csrf_token("the-token", new_session("the-token", 8080).split(".")[0])


def test_a_session_cookie_is_worth_nothing_on_another_port() -> None:
    session = new_session("the-token", 8080)
    assert valid_session("the-token", session, 8081) is None


def test_a_session_lapses_unless_renewed_and_a_renewal_keeps_its_csrf_token() -> None:
    start = 1_000_000.0
    session = new_session("the-token", 8080, now=start)
    found = valid_session("the-token", session, 8080, now=start + 10)
    assert found is not None and not found.wants_renewal(now=start + 10)
    assert found.wants_renewal(now=start + RENEW_AFTER_SECONDS)
    assert valid_session("the-token", session, 8080, now=start + SESSION_SECONDS) is None
    renewed = new_session("the-token", 8080, now=start + SESSION_SECONDS - 1, nonce=found.nonce)
    again = valid_session("the-token", renewed, 8080, now=start + SESSION_SECONDS + 10)
    assert again is not None and again.nonce == found.nonce  # so the page's CSRF token still holds


def test_a_restart_of_the_server_ends_its_sessions_though_the_token_is_the_same() -> None:
    before, after = ConsoleLogin("the-token"), ConsoleLogin("the-token")
    assert before.session_secret is not None and after.session_secret is not None
    cookie = new_session(before.session_secret, 8080)
    assert valid_session(before.session_secret, cookie, 8080) is not None
    assert valid_session(after.session_secret, cookie, 8080) is None


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


def test_a_cursor_the_store_could_not_hold_is_malformed() -> None:
    # An insert id past 64 bits made the store's read raise OverflowError in the SSE route.
    assert parse_cursor("2026-01-01T00:00:00.000000Z~" + "9" * 30) is None
    assert parse_cursor("2026-01-01T00:00:00.000000Z~9223372036854775808") is None
    assert parse_cursor("0001-01-01T00:00:00.000000Z~1") is None  # stepping back from it overflows
    assert parse_cursor("2026-01-01T00:00:00.000000Z~١٢") is None  # digits, but not ASCII ones
    assert parse_cursor("2026-01-01T00:00:00.000000Z~9223372036854775807") is not None


def _coordinates(chart: str) -> list[float]:
    import re

    numbers = re.findall(r'\s(?:cx|cy|x1|x2|y1|y2|x|y)="([^"]+)"', chart)
    numbers += [value for points in re.findall(r'points="([^"]*)"', chart) for pair in points.split()
                for value in pair.split(",")]
    return [float(value) for value in numbers]


@pytest.mark.parametrize("values", [[1e308, -1e308, 0.5], [1.7976931348623157e308] * 2, [-1e308, 5e307]])
def test_a_curve_draws_the_largest_finite_values_inside_its_frame(values: list[float]) -> None:
    chart = curves_chart("loss", {"train": list(enumerate(values))})
    coordinates = _coordinates(chart)
    assert coordinates and all(0 <= value <= 640 for value in coordinates), chart
    assert chart.count("<polyline") == 1


def test_the_objective_chart_draws_the_largest_finite_values() -> None:
    points = [TrialPoint("1", 1e308), TrialPoint("2", -1e308, best=True), TrialPoint("3", math.nan)]
    chart = objective_chart(points, maximize=False, metric="loss")
    assert all(0 <= value <= 640 for value in _coordinates(chart)), chart
    assert chart.count('class="trial-point') == 3 and chart.count("trial-point missing") == 1


def test_a_diverged_point_is_a_gap_and_a_mark_and_the_rest_of_the_curve_stays() -> None:
    points = [(0, 1.0), (1, 0.8), (2, math.nan), (3, 0.6), (4, 0.5), (5, math.inf), (6, 0.4)]
    chart = curves_chart("loss", {"train": points})
    assert chart.count("<polyline") == 2  # steps 0-1 and 3-4: the NaN breaks the line
    assert chart.count("non-finite") == 2 and 'data-value="nan"' in chart and 'data-value="inf"' in chart
    assert chart.count("<circle") == 3  # the lone step 6, and the two marks
    assert all(math.isfinite(value) for value in _coordinates(chart))


def test_a_chart_that_cannot_be_drawn_leaves_a_line_not_a_broken_page() -> None:
    def broken() -> Html:
        raise OverflowError("a chart's arithmetic failed")

    shown = drawn(broken, "loss")
    assert "could not be drawn" in shown and "<svg" not in shown


def _event_record(step: int, tag_name: str, value: float) -> bytes:
    """A TFRecord of an Event with one TF 1 simple_value (the CRCs are not checked by the reader)."""
    def key(number: int, wire: int) -> bytes:
        return bytes([number << 3 | wire])

    def length_delimited(number: int, payload: bytes) -> bytes:
        assert len(payload) < 128
        return key(number, 2) + bytes([len(payload)]) + payload

    value_message = length_delimited(1, tag_name.encode()) + key(2, 5) + struct.pack("<f", value)
    event = key(1, 1) + struct.pack("<d", 1.0) + key(2, 0) + bytes([step]) + \
        length_delimited(5, length_delimited(1, value_message))
    return struct.pack("<Q", len(event)) + b"\0" * 4 + event + b"\0" * 4


def test_a_big_event_file_is_read_a_budget_at_a_time(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "train"
    run.mkdir(parents=True)
    records = [_event_record(step, "loss", 1.0 / (step + 1)) for step in range(100)]
    (run / "events.out.tfevents.1.host").write_bytes(b"".join(records))
    reader = SummaryReader(read_budget=len(records[0]) * 30)
    seen = [len(reader.curves(tmp_path)["loss"]["logs/train"]) for _ in range(4)]
    assert seen == [30, 60, 90, 100]


def test_a_file_being_read_does_not_hold_up_another_jobs_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for root in (first, second):
        root.mkdir()
        (root / "events.out.tfevents.1.host").write_bytes(_event_record(0, "loss", 0.5))
    reader = SummaryReader()
    reader.curves(first)
    busy = threading.Event()
    release = threading.Event()
    original = SummaryReader._read_from

    def slow_read(path: Path, known: Any, budget: int) -> None:  # a big first file, read slowly
        if path.parent == first:
            busy.set()
            release.wait(30)
        original(path, known, budget)

    with (first / "events.out.tfevents.1.host").open("ab") as stream:
        stream.write(_event_record(1, "loss", 0.25))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SummaryReader, "_read_from", staticmethod(slow_read))
        reading = threading.Thread(target=reader.curves, args=(first,))
        reading.start()
        try:
            assert busy.wait(10)
            started = time.monotonic()
            assert reader.curves(second) == {"loss": {".": [(0, 0.5)]}}
            assert time.monotonic() - started < 5
        finally:
            release.set()
            reading.join(30)


def test_an_old_session_is_renewed_on_the_next_answer_with_its_nonce() -> None:
    import asyncio

    login = ConsoleLogin("the-token")
    assert login.session_secret is not None
    old = new_session(login.session_secret, 8080, now=time.time() - RENEW_AFTER_SECONDS - 1)
    scope: dict[str, Any] = {"type": "http", "server": ("127.0.0.1", 8080),
                             "headers": [(b"cookie", f"aiptrain-console-8080={old}".encode())]}
    assert login.signed_in(scope)
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def answer() -> None:
        await login.renewing(scope, send)({"type": "http.response.start", "status": 200, "headers": []})

    # In a thread of its own: a browser test before this one on the same worker may have left its
    # event loop running in this thread, where asyncio.run refuses to start another.
    runner = threading.Thread(target=asyncio.run, args=(answer(),))
    runner.start()
    runner.join(30)
    [(name, value)] = sent[0]["headers"]
    assert name == b"set-cookie"
    renewed = value.decode().split(";")[0].partition("=")[2]
    found = valid_session(login.session_secret, renewed, 8080)
    assert found is not None and found.nonce == old.split(".")[0] and not found.wants_renewal()
    # A fresh session is left alone.
    fresh: dict[str, Any] = {**scope, "headers": [(b"cookie", f"aiptrain-console-8080={renewed}".encode())]}
    assert login.signed_in(fresh) and login.renewing(fresh, send) is send


def test_a_console_route_that_fails_answers_its_own_page_with_the_policy() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from aiptrain._emulator.console.responses import CONTENT_SECURITY_POLICY
    from aiptrain._emulator.console.routes import _answering

    async def broken(request: Request) -> Response:
        raise OverflowError("int too large to convert to SQLite INTEGER")

    app = Starlette(routes=[Route("/console/projects/{project}/jobs/{job_id}", _answering(broken))])
    answer = TestClient(app, raise_server_exceptions=False).get("/console/projects/p/jobs/j")
    assert answer.status_code == 500 and "could not answer" in answer.text
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "SQLite" not in answer.text  # the cause is in the server's log, not on the page


@pytest.mark.parametrize(("pool_task_names", "shown"), [(True, "(workerpool1-2)"), (False, None)])
def test_a_task_is_worded_by_worker_pool_from_the_jobs_record_not_the_backends_name(
        pool_task_names: bool, shown: str | None) -> None:
    # "vertex" on both: only the record's fact (created as a Vertex AI job) decides the wording.
    view = JobView("p", Job(job_id="j"), "vertex", pool_task_names, "projects/p/jobs/j", {}, [], [], [], [], None, {})
    worded = _task_name(view, "worker-replica-2")
    assert ("<code>worker-replica-2</code>" in worded) and ((shown in worded) if shown else "workerpool" not in worded)
