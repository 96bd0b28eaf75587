"""Turns SIGTERM (preemption, job cancellation) into a request the training loop acts on.

The loop checks the request between steps, saves a checkpoint and exits with 128 + SIGTERM, so
a restarted replica resumes from where this one stopped instead of from the previous checkpoint.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

EXIT_TERMINATED = 128 + signal.SIGTERM

logger = logging.getLogger("trainer")


class TerminationRequest:
    def __init__(self) -> None:
        self._event = threading.Event()

    def install(self) -> TerminationRequest:
        # Signal handlers can only be set from the main thread; elsewhere (tests, notebooks)
        # the default SIGTERM behaviour stays.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)
        return self

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        logger.info("received SIGTERM: saving a checkpoint after the current step, then exiting")
        self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()
