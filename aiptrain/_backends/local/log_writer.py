"""The local backend's log sink: replica lines batched into the job store.

The replicas' output is turned into entries by `aiptrain._replicas.log_capture`; this module is
where those entries meet SQLite, so the shared replica core never loads the store.
"""

from __future__ import annotations

import collections
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import datetime

from aiptrain._backends.local.store import JobStore, PendingLine
from aiptrain._backends.local.store_errors import is_out_of_space, note
from aiptrain._replicas.clock import utc_now

# A state change waits at most this long for earlier lines to be stored.
_FLUSH_TIMEOUT_SECONDS = 60.0
# Lines read from replicas but not yet stored, per job, before reading pauses (back-pressure).
MAX_PENDING_LINES = 10_000
# Lines that could not be stored, kept in memory for the failed job's errorMessage.
UNSTORED_TAIL_LINES = 10


class StoreLogWriter:
    """A LogSink that batches entries into the job store from one background thread.

    Lines reach the store within about `flush_interval` seconds of being read, in small
    transactions instead of one per line, which keeps many chatty replicas cheap. At most
    MAX_PENDING_LINES wait in memory; beyond that `emit` blocks until the writer catches up.

    When the disk is full the writer stops storing and never blocks again: `failure` says why,
    `unstored` keeps the last lines it could not store, and `on_failure` is told once, so the
    supervisor can stop the job instead of leaving its replicas waiting on a full pipe.
    """

    def __init__(self, store: JobStore, job_key: int, *, flush_interval: float = 0.05,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self._store = store
        self._job_key = job_key
        self._flush_interval = flush_interval
        self._on_failure = on_failure
        self.failure: str | None = None
        self.unstored: collections.deque[str] = collections.deque(maxlen=UNSTORED_TAIL_LINES)
        # None stops the writer; an Event is a flush request, set once everything before it is stored.
        # Bounded: when the store falls behind, emit() blocks, the pipe fills and the replica waits
        # on its own write; memory stays flat and no line is dropped.
        self._queue: queue.Queue[PendingLine | threading.Event | None] = queue.Queue(MAX_PENDING_LINES)
        self._thread = threading.Thread(target=self._run, name=f"log-writer-{job_key}", daemon=True)
        self._thread.start()

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
        self._queue.put(PendingLine(captured or utc_now(), severity, task_name, message, trial_id))

    def flush(self) -> None:
        """Block until every line emitted so far is in the store (before a state change)."""
        stored = threading.Event()
        self._queue.put(stored)
        stored.wait(_FLUSH_TIMEOUT_SECONDS)

    def close(self) -> None:
        """Store everything emitted so far, then stop the writer thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[PendingLine] = []
            flushed: threading.Event | None = None
            item = self._queue.get()
            # A batch closes `flush_interval` after its first line, however fast lines keep coming,
            # or at once when someone waits for it.
            deadline = time.monotonic() + self._flush_interval
            while True:
                if item is None:
                    stopping = True
                    break
                if isinstance(item, threading.Event):
                    flushed = item
                    break
                batch.append(item)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or len(batch) >= 1000:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            self._store_batch(batch)
            if flushed is not None:
                flushed.set()

    def _store_batch(self, batch: list[PendingLine]) -> None:
        if not batch:
            return
        if self.failure is not None:
            self._keep_unstored(batch)
            return
        for attempt in range(20):
            try:
                self._store.append_logs(self._job_key, batch)
                return
            except Exception as error:
                if is_out_of_space(error):
                    self._fail(f"no space left on {self._store.home}: the job's log lines cannot be stored ({error})",
                               batch)
                    return
                if not isinstance(error, sqlite3.OperationalError):
                    # Losing a batch is bad; a dead writer that hangs the job's end is worse.
                    note(f"log writer: {len(batch)} line(s) lost: {error!r}")
                    return
                # Busy beyond the store's own timeout: keep the lines and try again shortly.
                time.sleep(0.1 * (attempt + 1))
        note(f"log writer: {len(batch)} line(s) lost: the store stayed busy")

    def _fail(self, reason: str, batch: list[PendingLine]) -> None:
        self.failure = reason
        self._keep_unstored(batch)
        note(f"log writer: {reason}")
        if self._on_failure is not None:
            self._on_failure(reason)

    def _keep_unstored(self, batch: list[PendingLine]) -> None:
        self.unstored.extend(f"{line.task_name}: {line.message}" for line in batch[-UNSTORED_TAIL_LINES:])
