"""Ctrl-C waits while a job is being created: a stored job always has its supervisor.

Between storing a job (QUEUED) and starting its supervisor, a KeyboardInterrupt would leave a job
that nobody runs until some later command happens to sweep it up. Within `interrupts_deferred()`
a SIGINT is noted instead, and raised as KeyboardInterrupt once the block is done, when the job
exists and runs; the caller then says which job it was. Only the main thread can take signals,
so elsewhere the block runs as it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
