"""Table of faults: a broken disk, a killed submitter, signals, runaway trainers. Each ends in a
clear message and exit code (1 for the environment's fault, 143 for SIGTERM), never a traceback,
and leaves no process or temporary file behind.

Counting the figures: each case of `FAULTS` is one fault tried; a passing case is one survived.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from aiptrain._backends.local import log_writer
from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._backends.local.log_writer import StoreLogWriter
from aiptrain._backends.local.store import JobStore
from aiptrain._job.spec import Job, JobState
from aiptrain._replicas.processes import is_running
from tests.fixtures.engine import kill_everything, state_of, wait_until

PROJECT = "fault-project"


def aiptrain(home: Path, *argv: str, env: dict[str, str] | None = None, read_only: bool = False,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "aiptrain", *argv]
    if read_only:
        command = _read_only(home, command)
    environment = {**os.environ, "AIPTRAIN_HOME": str(home), **(env or {})}
    environment.pop("AIPTRAIN_DEBUG", None)  # what a user sees, not the debugging traceback
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=timeout, check=False)


def _read_only(home: Path, command: list[str]) -> list[str]:
    """The command, run where `home` cannot be written (a read-only bind mount for root)."""
    if os.geteuid() != 0:
        for path in [home, *home.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        return command
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return ["unshare", "--map-root-user", "--mount", "sh", "-c", script, str(home), *command]


def clean_refusal(result: subprocess.CompletedProcess[str], exit_code: int, *texts: str) -> None:
    assert result.returncode == exit_code, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    for text in texts:
        assert text in result.stderr, result.stderr


def trainer(root: Path, setup: str | None = None) -> Path:
    package = root / "project" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hi')\n")
    if setup is not None:
        (root / "project" / "setup.py").write_text(setup)
    return package


def populated_home(tmp: Path) -> Path:
    home = tmp / "home"
    JobStore(home).close()
    return home


# -- the cases ----------------------------------------------------------------------------------


def read_only_home_list(tmp: Path) -> None:
    home = populated_home(tmp)
    clean_refusal(aiptrain(home, "jobs", "list", read_only=True), 1, "jobs.db", "writable")


def read_only_home_describe(tmp: Path) -> None:
    home = populated_home(tmp)
    clean_refusal(aiptrain(home, "jobs", "describe", "some_job", read_only=True), 1, "jobs.db", "writable")


def read_only_home_submit(tmp: Path) -> None:
    home = populated_home(tmp)
    package = trainer(tmp)
    result = aiptrain(home, "jobs", "submit", "training", "ro_job", "--package-path", str(package),
                      "--module-name", "trainer.task", "--region", "us-central1", read_only=True)
    clean_refusal(result, 1, "AIPTRAIN_HOME")


def read_only_home_serve(tmp: Path) -> None:
    home = populated_home(tmp)
    clean_refusal(aiptrain(home, "local", "serve", "--port", "0", read_only=True), 1, "jobs.db")


def home_is_a_file(tmp: Path) -> None:
    home = tmp / "home"
    home.write_text("not a directory")
    clean_refusal(aiptrain(home, "jobs", "list"), 1, "AIPTRAIN_HOME")


def store_is_not_a_database(tmp: Path) -> None:
    home = tmp / "home"
    home.mkdir()
    (home / "jobs.db").write_bytes(b"this is not SQLite" * 100)
    clean_refusal(aiptrain(home, "jobs", "list"), 1, "jobs.db")


def store_is_a_directory(tmp: Path) -> None:
    home = tmp / "home"
    (home / "jobs.db").mkdir(parents=True)
    clean_refusal(aiptrain(home, "jobs", "list"), 1, "jobs.db")


def _wal_deleted_under_a_holder(tmp: Path, *argv: str) -> None:
    home = tmp / "home"
    holder = JobStore(home)  # another aiptrain process with the store open (a supervisor, a server)
    holder.insert_job(PROJECT, Job.model_validate({"jobId": "held"}), "token")
    (home / "jobs.db-wal").unlink()
    try:
        clean_refusal(aiptrain(home, *argv), 1, "jobs.db-wal")
    finally:
        holder.close()


def wal_deleted_list(tmp: Path) -> None:
    _wal_deleted_under_a_holder(tmp, "jobs", "list", "--project", PROJECT)


def wal_deleted_describe(tmp: Path) -> None:
    _wal_deleted_under_a_holder(tmp, "jobs", "describe", "held", "--project", PROJECT)


def store_locked_by_a_writer(tmp: Path) -> None:
    """A long write transaction elsewhere does not stop readers (WAL): list still answers."""
    home = populated_home(tmp)
    blocker = sqlite3.connect(home / "jobs.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        result = aiptrain(home, "jobs", "list")
        assert result.returncode == 0, result.stderr
        assert "Listed 0 items." in result.stderr  # gcloud's informational line, on stderr
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


SLOW_SETUP = textwrap.dedent("""
    import os, time
    from setuptools import setup
    open(os.environ["BUILD_MARKER"], "w").write(str(os.getpid()))
    time.sleep(600)
    setup(name="trainer", version="1.0", packages=["trainer"])
""")


def sigterm_during_package_build(tmp: Path) -> None:
    package = trainer(tmp, setup=SLOW_SETUP)
    scratch = tmp / "tmp"
    scratch.mkdir()
    marker = tmp / "build.pid"
    environment = {**os.environ, "AIPTRAIN_HOME": str(tmp / "home"), "TMPDIR": str(scratch),
                   "BUILD_MARKER": str(marker)}
    cli = subprocess.Popen([sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "slow_build",
                            "--package-path", str(package), "--module-name", "trainer.task",
                            "--region", "us-central1", "--dry-run"],
                           env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: marker.exists() and marker.read_text(), 120, "the build to start")
        build = int(marker.read_text())
        assert list(scratch.iterdir()), "the build's temporary directory exists while it runs"
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 143, stderr
    assert "Terminated." in stderr and "Traceback" not in stderr
    assert wait_until(lambda: not is_running(build), 10, "the build subprocess to go")
    assert list(scratch.iterdir()) == []


SUBREAPER_HELPER = textwrap.dedent("""
    import os, subprocess, sys, time
    from aiptrain._backends.local.subreaper import become_subreaper, kill_descendants
    assert become_subreaper()
    # A child that starts a grandchild in its own session with an empty environment, then exits:
    # the orphaned grandchild re-parents to this process instead of init.
    child = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
        " start_new_session=True, env={}); print(p.pid)"], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    child.wait()
    deadline = time.monotonic() + 30
    while int(open(f"/proc/{grandchild}/stat").read().rsplit(")", 1)[1].split()[1]) != os.getpid():
        assert time.monotonic() < deadline, "the orphan was not re-parented to the subreaper"
        time.sleep(0.05)
    killed = kill_descendants()
    print(grandchild, grandchild in killed)
""")


def setsid_grandchild_without_token(tmp: Path) -> None:
    result = subprocess.run([sys.executable, "-c", SUBREAPER_HELPER], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    pid, killed = result.stdout.split()
    assert killed == "True"
    assert wait_until(lambda: not is_running(int(pid)), 10, "the grandchild to die")


def submitter_killed_before_the_supervisor(tmp: Path) -> None:
    home = tmp / "home"
    store = JobStore(home)
    record = store.insert_job(PROJECT, Job.model_validate({"jobId": "orphan", "trainingInput": {
        "region": "us-central1", "pythonModule": "missing.module"}}), "orphantoken")
    engine = LocalJobEngine(home)  # the next command's start-up sweep
    try:
        assert store.get_by_key(record.key).supervisor_pid is not None
        ended = wait_until(lambda: state_of(engine.get(PROJECT, "orphan")).is_terminal, 120, "the job to end")
        assert ended
        assert engine.get(PROJECT, "orphan").state == JobState.FAILED  # ran, and failed on its own terms
    finally:
        kill_everything(engine)


def stalled_store_backlog(tmp: Path) -> None:
    store = JobStore(tmp / "home")
    record = store.insert_job(PROJECT, Job.model_validate({"jobId": "chatty"}), "token")
    writer = StoreLogWriter(store, record.key, flush_interval=0.01)
    blocker = sqlite3.connect(tmp / "home" / "jobs.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    total = log_writer.MAX_PENDING_LINES * 3

    def produce() -> None:
        for i in range(total):
            writer.emit("master-replica-0", "INFO", f"l{i}")

    producer = threading.Thread(target=produce)
    producer.start()
    wait_until(writer._queue.full, what="the backlog to fill")
    assert producer.is_alive()  # it waits for the store instead of queueing everything
    blocker.execute("ROLLBACK")
    blocker.close()
    producer.join(timeout=120)
    writer.close()
    count = store.connection().execute("SELECT COUNT(*) FROM logs WHERE job_key = ?", (record.key,)).fetchone()[0]
    assert count == total


def cache_directory_unwritable(tmp: Path) -> None:
    home = populated_home(tmp)
    (home / "cache").write_text("a file where the cache directory should be")
    package = trainer(tmp)
    result = aiptrain(home, "jobs", "submit", "training", "no_cache", "--package-path", str(package),
                      "--module-name", "trainer.task", "--region", "us-central1", "--dry-run")
    clean_refusal(result, 1, "cache")


def config_is_a_fifo_that_never_ends(tmp: Path) -> None:
    """`--config <(yes)`: read up to the limit, then refused."""
    package = trainer(tmp)
    producer = subprocess.Popen(["yes", "padding: 1"], stdout=subprocess.PIPE)
    try:
        assert producer.stdout is not None
        fifo = f"/dev/fd/{producer.stdout.fileno()}"
        result = subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "fifo_job",
                                 "--package-path", str(package), "--module-name", "trainer.task",
                                 "--region", "us-central1", "--dry-run", "--config", fifo],
                                env={**os.environ, "AIPTRAIN_HOME": str(tmp / "home")}, pass_fds=(
                                    producer.stdout.fileno(),), capture_output=True, text=True, timeout=120,
                                check=False)
    finally:
        producer.kill()
        producer.wait()
    clean_refusal(result, 2, "--config", "larger than")


FAULTS: list[tuple[str, Callable[[Path], None]]] = [
    ("read-only-home-list", read_only_home_list),
    ("read-only-home-describe", read_only_home_describe),
    ("read-only-home-submit", read_only_home_submit),
    ("read-only-home-serve", read_only_home_serve),
    ("home-is-a-file", home_is_a_file),
    ("store-is-not-a-database", store_is_not_a_database),
    ("store-is-a-directory", store_is_a_directory),
    ("wal-deleted-list", wal_deleted_list),
    ("wal-deleted-describe", wal_deleted_describe),
    ("store-locked-by-a-writer", store_locked_by_a_writer),
    ("sigterm-during-package-build", sigterm_during_package_build),
    ("setsid-grandchild-without-token", setsid_grandchild_without_token),
    ("submitter-killed-before-the-supervisor", submitter_killed_before_the_supervisor),
    ("stalled-store-backlog", stalled_store_backlog),
    ("cache-directory-unwritable", cache_directory_unwritable),
    ("config-is-a-fifo-that-never-ends", config_is_a_fifo_that_never_ends),
]


@pytest.mark.parametrize("fault", [case[1] for case in FAULTS], ids=[case[0] for case in FAULTS])
def test_fault_is_survived(tmp_path: Path, fault: Callable[[Path], None]) -> None:
    fault(tmp_path)
    if tmp_path.exists() and os.geteuid() != 0:  # give back what the read-only cases took away
        for path in [tmp_path, *tmp_path.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    shutil.rmtree(tmp_path, ignore_errors=True)
