"""A build or install that makes no progress is stopped, run once more, then failed naming why;
one that is slow, busy, or waiting for a busy lock holder is left alone (`environments.stall`).

Real processes throughout: the watch reads what the kernel counts for them (`/proc`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain._environments.preparation import _Install
from aiptrain._environments.stall import SETTING, StallWatch, stall_limit
from aiptrain._environments.store import EnvironmentBuildFailed, EnvironmentStore
from aiptrain._replicas.processes import TOKEN_VARIABLE, tokened_processes
from aiptrain.errors import UsageError
from tests.fixtures.held_index import HeldIndex

from .test_build_cancel import published
from .test_environment_store import small_resolution

LIMIT = 3.0
# A process that keeps working: a line every half second (a download, a compile).
BUSY = "import time\nwhile True:\n    print('x' * 64, flush=True)\n    time.sleep(0.5)"


def _group(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(argv), start_new_session=True, stdout=subprocess.DEVNULL)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        _kill_group(process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _stalls_within(watch: StallWatch, seconds: float) -> float | None:
    """Seconds until `watch` says stalled, or None if it does not within `seconds`."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        if watch.check():
            return time.monotonic() - began
        time.sleep(0.2)
    return None


def test_a_silent_process_stalls_and_a_busy_one_does_not(processes: list[subprocess.Popen[bytes]]) -> None:
    silent = _group("sleep", "60")
    busy = _group(sys.executable, "-c", BUSY)
    processes += [silent, busy]
    took = _stalls_within(StallWatch(silent.pid, LIMIT), 15)
    assert took is not None and took >= LIMIT
    assert _stalls_within(StallWatch(busy.pid, LIMIT), 2 * LIMIT + 3) is None


def test_waiting_for_a_lock_counts_as_the_holders_progress(
        tmp_path: Path, processes: list[subprocess.Popen[bytes]]) -> None:
    lock = tmp_path / "wheel.lock"
    lock.touch()
    # A holder that keeps working (a download of the wheel), then one that does nothing.
    busy_holder = _group("flock", str(lock), sys.executable, "-c", BUSY)
    processes.append(busy_holder)
    time.sleep(0.5)
    waiter = _group("flock", str(lock), "true")
    processes.append(waiter)
    assert _stalls_within(StallWatch(waiter.pid, LIMIT), 2 * LIMIT + 3) is None
    assert waiter.poll() is None, "the waiter got the lock: the test held nothing"

    _kill_group(busy_holder)
    idle_holder = _group("flock", str(lock), "sleep", "60")
    processes.append(idle_holder)
    waiter.wait(10)  # it took the lock as the busy holder died; wait behind the idle one instead
    time.sleep(0.5)
    second = _group("flock", str(lock), "true")
    processes.append(second)
    watch = StallWatch(second.pid, LIMIT)
    assert _stalls_within(watch, 15) is not None
    line = watch.explain("uv")
    assert f"waiting for a lock held by process {idle_holder.pid} (flock" in line, line
    assert SETTING in line


def test_the_limit_is_read_and_checked() -> None:
    assert stall_limit({}) == 120.0
    assert stall_limit({SETTING: "30"}) == 30.0
    assert StallWatch(1, stall_limit({SETTING: "0"})).check() is False  # 0: never
    for bad in ("soon", "-5"):
        with pytest.raises(UsageError) as refused:
            stall_limit({SETTING: bad})
        assert SETTING in refused.value.message and SETTING in (refused.value.hint or "")


def test_a_build_that_stalls_twice_fails_saying_so_and_leaves_nothing(
        tmp_path: Path, held_index: HeldIndex) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    lines: list[str] = []
    outcome: list[BaseException] = []

    def build() -> None:
        try:
            store.ensure(small_resolution("six==1.16.0"), progress=lines.append, extra_env={
                "UV_DEFAULT_INDEX": held_index.url, TOKEN_VARIABLE: "stalled-build", SETTING: str(LIMIT)})
        except BaseException as error:  # the test looks at what it was
            outcome.append(error)

    builder = threading.Thread(target=build)
    builder.start()
    builder.join(120)  # the index holds each request 120 s: only the watch ends it sooner
    assert not builder.is_alive(), "the stalled build was never stopped"
    assert len(outcome) == 1 and isinstance(outcome[0], EnvironmentBuildFailed), outcome
    message = outcome[0].message
    assert "made no progress for 3 s" in message and "it stalled twice" in message, message
    assert "the package index or the network stalled" in message
    assert any("it was stopped and runs once more" in line for line in lines), lines
    assert held_index.asked >= 2, "the build was not run again"
    assert published(store.root) == []
    assert tokened_processes("stalled-build") == [], "a stalled uv was left running"


class _Lines:
    """A log sink keeping (severity, message)."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []

    def emit(self, task_name: str, severity: str, message: str, **_details: object) -> None:
        self.said.append((severity, message))


def test_an_install_that_stalls_runs_once_more_then_says_it_stalled_twice(tmp_path: Path) -> None:
    sink = _Lines()
    install = _Install(cache=tmp_path, env={SETTING: "2"}, sink=sink, stop=threading.Event(), kill_grace=1.0)
    began = time.monotonic()
    result = install.run(["sleep", "60"], {"PATH": os.environ["PATH"]}, tmp_path)
    assert time.monotonic() - began < 30
    assert result.returncode == 1 and result.stalled is not None
    assert result.stalled.startswith("sleep made no progress for 2 s") and "(it stalled twice)" in result.stalled
    assert any(severity == "WARNING" and "runs once more" in message for severity, message in sink.said), sink.said
