"""Log capture: severities, task names, lifecycle lines, cursors, and how fast lines show up."""

from __future__ import annotations

import time

import pytest

from aiptrain.backends.local.engine import LocalEngine
from aiptrain.job.logs import LogCursor, LogEntry
from aiptrain.job.spec import JobState
from aiptrain.replicas.log_capture import LineClassifier
from tests.fixtures.engine import state_of
from tests.fixtures.local_jobs import PROJECT, make_job, training_input, wait_for_end


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


def test_job_log_has_severities_task_names_and_lifecycle(engine: LocalEngine, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("chatty", training_input(package_uri, "tfcfg.chatter", workers=1,
                                                              job_dir="gs://out/chatty")))
    done = wait_for_end(engine, "chatty")
    assert done.state == JobState.SUCCEEDED, done.error_message
    entries = engine.logs(PROJECT, "chatty")
    master = [(e.severity, e.message) for e in entries if e.task_name == "master-replica-0"]
    assert ("INFO", "plain stdout line") in master
    assert ("ERROR", "plain stderr line") in master
    assert ("WARNING", "structured warning") in master
    assert ("DEBUG", "structured debug") in master
    traceback_start = master.index(("ERROR", "Traceback (most recent call last):"))
    assert ("ERROR", "ValueError: caught on purpose") in master[traceback_start:]
    assert ("INFO", "after the traceback") in master
    assert ("INFO", "worker-replica-0 says hi") in [
        (e.severity, e.message) for e in entries if e.task_name == "worker-replica-0"]
    assert {e.task_name for e in entries} == {"service", "master-replica-0", "worker-replica-0"}
    assert all(e.trial_id is None for e in entries)
    service = [e.message for e in entries if e.task_name == "service"]
    for expected in ("Job QUEUED.", "Job PREPARING.", "Job RUNNING.", "Job completed successfully."):
        assert expected in service
    assert any(m.startswith("Installing package(s): gs://staging/packages/") for m in service)
    assert any(m.startswith("Starting master-replica-0: ") and " -m tfcfg.chatter" in m for m in service)
    assert service.index("Job QUEUED.") < service.index("Job RUNNING.") < service.index("Job completed successfully.")
    keys = [(e.timestamp, e.insert_id) for e in entries]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(e.timestamp.tzinfo is not None for e in entries)
    worker_only = engine.logs(PROJECT, "chatty", task_name="worker-replica-0")
    assert worker_only and {e.task_name for e in worker_only} == {"worker-replica-0"}


def test_cursor_reads_return_only_new_entries_and_lines_arrive_fast(engine: LocalEngine, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("ticker", training_input(package_uri, "tfcfg.chatter", args=["--ticks", "15"])))
    seen: list[LogEntry] = []
    delays: list[float] = []
    cursor: LogCursor | None = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        batch = engine.logs(PROJECT, "ticker", after=cursor, limit=7)
        now = time.time()
        for entry in batch:
            assert cursor is None or entry.cursor > cursor, "a cursor read returned an old entry"
            if entry.message.startswith("TICK "):
                delays.append(now - float(entry.message.split()[2]))
            cursor = entry.cursor
        seen.extend(batch)
        if not batch:
            if state_of(engine.get(PROJECT, "ticker")).is_terminal and not engine.logs(PROJECT, "ticker", after=cursor):
                break
            time.sleep(0.02)
    assert [e.insert_id for e in seen] == [e.insert_id for e in engine.logs(PROJECT, "ticker")]
    assert len(delays) == 15
    # Generous: a line printed by the trainer is readable well within a second.
    assert max(delays) < 1.0, delays


def test_a_finished_job_already_shows_its_last_lines(engine: LocalEngine, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("last_lines", training_input(package_uri, "tfcfg.chatter")))
    # Watch as closely as a follower would: the moment the state is final, the lines must be there.
    while not state_of(engine.get(PROJECT, "last_lines")).is_terminal:
        time.sleep(0.005)
    entries = engine.logs(PROJECT, "last_lines")
    assert entries[-1].task_name == "service" and entries[-1].message == "Job completed successfully."
    assert "chatter done" in [e.message for e in entries if e.task_name == "master-replica-0"]
