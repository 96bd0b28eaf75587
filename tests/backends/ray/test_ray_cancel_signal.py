"""How the Ray driver hears of a cancel (`cancel_signal`): SIGTERM from `ray job stop`, or the death
of the shell Ray started it from (`parent_watch`: an orphaned driver kept its replicas and placement
group for ever).

Real child interpreters, signalled for real; no Ray is needed for the mechanism."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.fixtures.emulator import REPO

# The driver's own arrangement: its printer, its stop event, its CancelSignal.
CHILD = textwrap.dedent('''
    import sys, threading
    from aiptrain._backends.ray.cancel_signal import CancelSignal
    from aiptrain._backends.ray.driver import LinePrinter

    stop = threading.Event()
    CancelSignal(LinePrinter().say, stop).install()
    open(sys.argv[1] + ".armed", "w").write("armed")
    stop.wait(60)
    open(sys.argv[1], "w").write("stopped" if stop.is_set() else "never stopped")
''')

# SIGTERM while the main thread prints a line (the printer's lock held), as the driver mostly is.
MID_LINE = textwrap.dedent('''
    import os, signal, threading, time
    from aiptrain._backends.ray.cancel_signal import CancelSignal
    from aiptrain._backends.ray.driver import LinePrinter

    printer = LinePrinter()
    stop = threading.Event()
    cancel = CancelSignal(printer.say, stop)
    cancel.install()
    with printer.lock:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)  # the handler runs in this thread, between two bytecodes, lock held
    stop.wait(10)
    cancel.settle()
    printer.say("Job cancelled.")
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


def test_a_sigterm_while_the_driver_prints_stops_it_and_is_said_before_the_last_line() -> None:
    # A handler that printed waited for the lock its own thread held: the driver hung until Ray
    # killed it, the job's builds and replicas never stopped.
    run = subprocess.run([sys.executable, "-c", MID_LINE], env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    messages = [line.rsplit("\t", 1)[-1] for line in run.stdout.splitlines()]
    assert messages == ["Cancel requested.", "Job cancelled."], run.stdout
