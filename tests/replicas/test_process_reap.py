"""A replica process may be reaped from two threads at once (on Ray, the replica's output pump
and its stop): each gets the exit status, and its exit descriptor is closed exactly once."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from aiptrain._replicas.processes import ManagedProcess, start_process


def _reap_from_threads(process: ManagedProcess, count: int) -> list[object]:
    start = threading.Barrier(count)
    results: list[object] = []

    def reap() -> None:
        start.wait()
        try:
            results.append(process.reap())
        except Exception as error:  # what the race used to raise: OSError EBADF
            results.append(error)

    threads = [threading.Thread(target=reap) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_concurrent_reaps_all_get_the_status_and_none_fails(tmp_path: Path) -> None:
    for _ in range(30):
        process = start_process([sys.executable, "-c", "raise SystemExit(3)"], env={}, cwd=tmp_path)
        assert process.exit_fd() is not None  # the pidfd the reaps must close once
        while not process.has_exited():
            time.sleep(0.01)
        assert _reap_from_threads(process, 4) == [3, 3, 3, 3]
        assert process.exit_fd() is None  # reaped: no descriptor left open
