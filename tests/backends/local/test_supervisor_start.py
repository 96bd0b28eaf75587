"""How the command line starts a job's supervisor: forked from itself when that is safe, exec'd
otherwise; either way detached from the command (own session, no inherited descriptor, its output
in supervisor.log) and without aiptrain's secrets in its environment."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._replicas.processes import is_running
from tests.fixtures.engine import kill_everything, wait_until

PROJECT = "local-project"
@pytest.fixture
def engine(isolated_environment: Path) -> Iterator[LocalJobEngine]:
    engine = LocalJobEngine(isolated_environment)
    yield engine
    kill_everything(engine)


def submit_holding_a_pipe(job_id: str, package: Path, env: dict[str, str]) -> int:
    """Submit through the real command with one more pipe inherited; its read end, which sees EOF
    only once no process holds the write end (so the supervisor must not either)."""
    reader, writer = os.pipe()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "aiptrain", "jobs", "submit", "training", job_id, "--package-path",
             str(package), "--module-name", "trainer.task", "--region", "us-central1", "--", "sleep"],
            capture_output=True, text=True, timeout=240, env=env, pass_fds=(writer,), check=False)
    finally:
        os.close(writer)
    assert result.returncode == 0, result.stderr
    return reader


def supervisor_of(engine: LocalJobEngine, job_id: str) -> int:
    pid = wait_until(lambda: engine.processes(PROJECT, job_id).supervisor_pid, 60, "the supervisor's pid")
    assert isinstance(pid, int) and is_running(pid)
    return pid


def check_detached(pid: int, reader: int, home: Path, job_id: str) -> None:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    assert int(fields[3]) == pid, "the supervisor leads a session of its own"
    readable, _, _ = select.select([reader], [], [], 30)
    assert readable and os.read(reader, 1) == b"", "the supervisor holds a descriptor the command inherited"
    os.close(reader)
    fd = Path(f"/proc/{pid}/fd")
    log = home / "jobs" / PROJECT / job_id / "supervisor.log"
    assert os.readlink(fd / "0") == os.devnull
    assert os.readlink(fd / "1") == os.readlink(fd / "2") == str(log)


def test_the_command_forks_the_supervisor(engine: LocalJobEngine, isolated_environment: Path, trainer: Path) -> None:
    reader = submit_holding_a_pipe("forked", trainer, dict(os.environ))
    pid = supervisor_of(engine, "forked")
    check_detached(pid, reader, isolated_environment, "forked")
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[:5] == [b"aiptrain._backends.local.supervisor", b"--home", str(isolated_environment).encode(),
                           b"--job-key", str(engine.store.get(PROJECT, "forked").key).encode()]
    engine.cancel(PROJECT, "forked")  # the supervisor answers SIGTERM like an exec'd one
    done = wait_until(lambda: engine.get(PROJECT, "forked").state == "CANCELLED", 60, "CANCELLED")
    assert done and wait_until(lambda: not is_running(pid), 30, "the supervisor to exit")


def test_a_command_holding_a_secret_execs_the_supervisor_without_it(
        engine: LocalJobEngine, isolated_environment: Path, trainer: Path) -> None:
    # A forked process would keep showing the command's environment in /proc/PID/environ.
    reader = submit_holding_a_pipe("execd", trainer, {**os.environ, "AIPTRAIN_API_TOKEN": "s3cret-token"})
    pid = supervisor_of(engine, "execd")
    check_detached(pid, reader, isolated_environment, "execd")
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[1:3] == [b"-m", b"aiptrain._backends.local.supervisor"]
    assert b"s3cret-token" not in Path(f"/proc/{pid}/environ").read_bytes()
