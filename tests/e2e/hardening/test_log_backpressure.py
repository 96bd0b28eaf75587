"""The supervisor's log writer holds a bounded backlog: a store that falls behind slows the
replicas down instead of filling memory, and no line is lost."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from aiptrain._backends.local import log_writer
from aiptrain._backends.local.log_writer import StoreLogWriter
from aiptrain._backends.local.store import JobStore
from aiptrain._job.spec import Job
from tests.fixtures.engine import wait_until


def test_a_stalled_store_blocks_emit_at_the_bound_and_loses_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_writer, "MAX_PENDING_LINES", 50)
    store = JobStore(tmp_path)
    record = store.insert_job("my-project", Job.model_validate({"jobId": "noisy"}), "token")
    writer = StoreLogWriter(store, record.key, flush_interval=0.01)
    blocker = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database: nothing can be stored
    total = 5000
    emitted: list[int] = []

    def produce() -> None:
        for index in range(total):
            writer.emit("master-replica-0", "INFO", f"line {index}")
            emitted.append(index)

    producer = threading.Thread(target=produce)
    producer.start()
    # The backlog fills up to its bound, and then the producer waits instead of queueing more.
    wait_until(writer._queue.full, what="the backlog to reach its bound")
    stalled_at = len(emitted)
    assert stalled_at < total
    # At most the bound, plus one batch the writer took before it found the store locked.
    assert stalled_at <= 50 + 1000 + 1
    blocker.execute("ROLLBACK")
    blocker.close()
    producer.join(timeout=120)
    writer.close()
    messages = [row[0] for row in store.connection().execute(
        "SELECT message FROM logs WHERE job_key = ? ORDER BY rowid", (record.key,))]
    assert messages == [f"line {index}" for index in range(total)]
