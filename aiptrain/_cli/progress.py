"""An upload progress bar on stderr, used only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

WIDTH = 30


def progress_bar_factory(label: str, total: int) -> Callable[[int, int], None]:
    """A callback drawing `label [#####     ]  42%  3.1 MB/s` in place."""
    started = time.monotonic()

    def draw(sent: int, size: int) -> None:
        size = size or total or 1
        done = min(sent / size, 1.0)
        rate = sent / max(time.monotonic() - started, 1e-6) / 1e6
        bar = "#" * int(done * WIDTH)
        sys.stderr.write(f"\r{label} [{bar:<{WIDTH}}] {done:4.0%} {rate:5.1f} MB/s")
        if sent >= size:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return draw
