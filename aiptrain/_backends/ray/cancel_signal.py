"""How the Ray driver hears of a cancel: SIGTERM from `ray job stop`, or its parent's death.

The handler only sets the stop event. Python runs a signal handler in the main thread, between two
of its bytecodes, and the main thread is often in the middle of printing a log line with the
printer's lock held: a handler that printed would wait for that lock for ever, the replicas and
builds would never be stopped, and Ray would kill the driver once its stop wait ran out, with the
job's last lines unsaid and a half-built environment left on a node. So "Cancel requested." is
said by a thread of its own, as soon as the event is set.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from aiptrain._backends.ray import joblog
from aiptrain._backends.ray.parent_watch import stop_with_parent

# How long the job's last line waits for the cancel's line to be said before it.
_SAY_TIMEOUT_SECONDS = 5.0


class CancelSignal:
    def __init__(self, say: Callable[[str], None], stop: threading.Event) -> None:
        self.say = say
        self.stop = stop
        self._announcer = threading.Thread(target=self._announce, name="aiptrain-cancel", daemon=True)

    def install(self) -> None:
        """Handle SIGTERM (after `ray.init`, whose own handler exits at once) and the parent's death."""
        self._announcer.start()
        signal.signal(signal.SIGTERM, self._on_term)
        stop_with_parent(self.stop.set)

    def settle(self) -> None:
        """Before the job's last line: a cancel's line has been said."""
        if self.stop.is_set():
            self._announcer.join(_SAY_TIMEOUT_SECONDS)

    def _on_term(self, _signum: int, _frame: FrameType | None) -> None:
        self.stop.set()

    def _announce(self) -> None:
        self.stop.wait()
        self.say(joblog.CANCEL_REQUESTED_LINE)
