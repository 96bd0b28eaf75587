"""A job's new log lines as server-sent events, until the job ends or the server stops.

The stream starts after a cursor (the last line the page shows, or the `Last-Event-ID` a
reconnecting browser sends back) and polls the engine's cursor read, as `--stream-logs` does:

    event: lines   data: [entry, ...]   id: CURSOR    (kept by the filter; the id moves on regardless)
    event: job     data: {"state": "RUNNING"}         (at start and on every change)
    event: end     data: {}                           (the job ended and its last lines were sent)

Lines are read in batches of `BATCH`, back to back while a backlog remains, then every
`POLL_SECONDS`; a comment line keeps an idle connection open. The server sets `stopping` when
it shuts down, and every stream ends within one poll.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool

from aiptrain._emulator.console.log_pages import LogFilter, cursor_text, entry_json
from aiptrain._job.logs import LogCursor, LogEntry
from aiptrain._job.state import TERMINAL_STATES, JobState

BATCH = 500
POLL_SECONDS = 0.5
KEEPALIVE_SECONDS = 15.0
RECONNECT_MILLISECONDS = 1000
# Empty reads after the job ended before the stream says `end`: lines the supervisor writes
# just after recording the final state still arrive.
DRAIN_READS = 2


class Stopping(Protocol):
    def is_set(self) -> bool:
        """True once the server is shutting down."""


def event(name: str, data: Any, *, event_id: str | None = None) -> str:
    lines = [f"event: {name}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"data: {json.dumps(data, separators=(',', ':'))}")
    return "\n".join(lines) + "\n\n"


async def follow(read_after: Callable[[LogCursor | None], list[LogEntry]], job_state: Callable[[], JobState],
                 after: LogCursor | None, log_filter: LogFilter, stopping: Stopping) -> AsyncIterator[str]:
    """`read_after(cursor)`: at most BATCH entries after it; `job_state()`: the job's state now
    (both run in the thread pool: they read the store)."""
    yield f"retry: {RECONNECT_MILLISECONDS}\n\n"
    last_state: JobState | None = None
    empty_after_end = 0
    quiet_since = time.monotonic()
    while not stopping.is_set():
        entries = await run_in_threadpool(read_after, after)
        state = await run_in_threadpool(job_state)
        if entries:
            after = entries[-1].cursor
            kept = [entry_json(entry) for entry in entries if log_filter.keeps(entry)]
            yield event("lines", kept, event_id=cursor_text(after))
            quiet_since = time.monotonic()
        if state != last_state:
            yield event("job", {"state": state.value})
            last_state = state
        if len(entries) >= BATCH:
            continue
        if state in TERMINAL_STATES:
            empty_after_end = 0 if entries else empty_after_end + 1
            if empty_after_end >= DRAIN_READS:
                yield event("end", {})
                return
        if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
            yield ": still here\n\n"
            quiet_since = time.monotonic()
        await asyncio.sleep(POLL_SECONDS)
