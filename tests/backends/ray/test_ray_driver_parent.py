"""The Ray driver is stopped, as by a cancel, when the shell Ray started it from dies
(`parent_watch`): an orphaned driver kept its replicas and placement group for ever.

A real shell parent and a real child interpreter; no Ray is needed for the mechanism."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.fixtures.emulator import REPO

# The driver's own arrangement: a SIGTERM handler that stops, then `stop_with_parent`.
CHILD = textwrap.dedent('''
    import signal, sys, threading, time
    from aiptrain.backends.ray.parent_watch import stop_with_parent

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    orphan = stop_with_parent(stop.set)
    open(sys.argv[1] + ".armed", "w").write("orphan" if orphan else "armed")
    stop.wait(60)
    open(sys.argv[1], "w").write("stopped" if stop.is_set() else "never stopped")
''')


def _wait_for(path: Path, seconds: float = 30) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path.name} was never written")


def test_a_driver_whose_parent_shell_dies_is_stopped_as_by_a_cancel(tmp_path: Path) -> None:
    marker = tmp_path / "outcome"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # As Ray runs an entrypoint: a shell with the interpreter as its child (`wait` keeps it from exec-ing).
    shell = subprocess.Popen(["/bin/sh", "-c", f'"{sys.executable}" "{script}" "{marker}" & wait'], env=env,
                             start_new_session=True)
    try:
        assert _wait_for(Path(f"{marker}.armed")) == "armed"
        assert not marker.exists(), "the child stopped before its parent died"
        os.kill(shell.pid, signal.SIGKILL)  # the shell alone: the child is not signalled by anyone
        shell.wait()
        assert _wait_for(marker, 10) == "stopped"
    finally:
        try:
            os.killpg(shell.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
