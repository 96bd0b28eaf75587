"""A job's log on the local backend: severities, task names, lifecycle lines, cursors, and how fast
lines show up. (How the replicas' log capture classifies each line: tests/replicas/test_log_capture.py.)"""

from __future__ import annotations

import time
from pathlib import Path

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.spec import JobState
from tests.fixtures.engine import state_of
from tests.fixtures.local_jobs import PROJECT, make_job, training_input, wait_for_end


def test_job_log_has_severities_task_names_and_lifecycle(engine: LocalJobEngine, package_uri: str) -> None:
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


def test_cursor_reads_return_only_new_entries_and_lines_arrive_fast(engine: LocalJobEngine, package_uri: str) -> None:
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


def test_a_finished_job_already_shows_its_last_lines(engine: LocalJobEngine, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("last_lines", training_input(package_uri, "tfcfg.chatter")))
    # Watch as closely as a follower would: the moment the state is final, the lines must be there.
    while not state_of(engine.get(PROJECT, "last_lines")).is_terminal:
        time.sleep(0.005)
    entries = engine.logs(PROJECT, "last_lines")
    assert entries[-1].task_name == "service" and entries[-1].message == "Job completed successfully."
    assert "chatter done" in [e.message for e in entries if e.task_name == "master-replica-0"]


def test_stream_logs_tail_and_since_on_a_large_log_start_at_the_right_line(home: Path) -> None:
    """`--tail N` seeks to the last N lines (the store's newest end), `--since` to an instant."""
    import os
    import subprocess
    import sys

    from tests.fixtures.large_logs import finished_job_with_lines

    finished_job_with_lines(home, "tail-project", "big", 30_000)

    def stream(*flags: str) -> list[str]:
        result = subprocess.run([sys.executable, "-m", "aiptrain", "--project", "tail-project", "jobs", "stream-logs",
                                 "big", *flags], capture_output=True, text=True, timeout=120, env={**os.environ})
        assert result.returncode == 0, result.stderr
        return [line.rsplit("\t", 1)[-1] for line in result.stdout.splitlines()]

    assert stream("--tail", "3") == ["line 29997", "line 29998", "line 29999"]
    assert stream("--tail", "0") == []
    # The lines are 1 ms apart over 30 s and end a second before the job was stored.
    recent = stream("--since", "10s")
    assert recent and recent[-1] == "line 29999" and len(recent) < 30_000
