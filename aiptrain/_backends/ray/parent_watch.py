"""A Ray driver ends with the process Ray started it from.

`ray job stop` signals the entrypoint Ray started (a shell running `python -m
aiptrain._backends.ray.driver`). A stop that comes while Ray is still starting the job can kill that
shell and leave the driver an orphan that no one signals: its replicas then run on, holding their
placement group, and later jobs wait for room behind them. So the driver asks the kernel for a
SIGTERM when its parent dies, which it handles as any cancel (the replicas stopped, the actors and
the placement group released). A driver whose parent died before it could ask is stopped at once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from aiptrain._replicas._die_with_parent import signal_on_parent_death

_INIT = 1  # orphans are re-parented to init (or the container's first process)


def stop_with_parent(stop: Callable[[], None]) -> bool:
    """Arrange SIGTERM on the parent's death (the caller's handler does the stopping); call `stop`
    now and return True if the parent is already gone. Without prctl (not Linux) nothing is armed."""
    if not signal_on_parent_death(signal.SIGTERM):
        return False
    if os.getppid() == _INIT:
        stop()
        return True
    return False
