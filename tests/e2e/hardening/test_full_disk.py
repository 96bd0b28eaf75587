"""A full disk is said, never a wedge: a submit without room says so before writing anything, a
running job whose logs can no longer be stored fails with the reason and its last lines, and a
cancel on a full disk still stops the job.

AIPTRAIN_HOME sits on a small tmpfs (root can mount one here); where mounting is not allowed, a
loop-mounted file system would do, and without either the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.engine import wait_until

SMALL = "8m"  # room for the package build's cache, not for the reserve the job store needs


def _mount_tmpfs(target: Path, size: str) -> str | None:
    """None once mounted, else why not."""
    if os.geteuid() != 0:
        return "mounting a small file system needs root"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(target)],
                          capture_output=True, text=True)
    if done.returncode == 0:
        return None
    image = target.parent / "small.img"
    with open(image, "wb") as stream:
        stream.truncate(16 * 1024 * 1024)
    made = subprocess.run(["mkfs.ext4", "-q", str(image)], capture_output=True, text=True)
    if made.returncode == 0 and subprocess.run(["mount", "-o", "loop", str(image), str(target)],
                                               capture_output=True).returncode == 0:
        return None
    return f"neither a tmpfs nor a loop-mounted file system can be mounted here: {done.stderr.strip()}"


@contextlib.contextmanager
def _small_file_system(tmp_path: Path, size: str) -> Iterator[Path]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    reason = _mount_tmpfs(mount_point, size)
    if reason is not None:
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    with _small_file_system(tmp_path, SMALL) as mount_point:
        yield mount_point / "home"


@pytest.fixture
def roomy_home(tmp_path: Path) -> Iterator[Path]:
    """Room for a submit (packages + the store's reserve), and little more."""
    with _small_file_system(tmp_path, "24m") as mount_point:
        yield mount_point / "home"


def _fill(directory: Path) -> None:
    """Write zeros beside `directory` until its file system has no byte left."""
    descriptor = os.open(directory.parent / "filler", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        for chunk in (64 * 1024, 1):  # big blocks, then the last partial one
            with contextlib.suppress(OSError):
                while True:
                    os.write(descriptor, bytes(chunk))
    finally:
        os.close(descriptor)


def _submit(home: Path, tmp_path: Path, job_id: str, trainer: str) -> None:
    package = tmp_path / job_id / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(trainer)
    done = _aiptrain(home, "jobs", "submit", "training", job_id, "--package-path", str(package),
                     "--module-name", "trainer.task", "--region", "us-central1")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: (home / "jobs" / "local-project" / job_id / "work" / "started").exists(), 120,
               "the trainer to start")


def _aiptrain(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", *argv], env={**os.environ, "AIPTRAIN_HOME": str(home)},
                          capture_output=True, text=True, timeout=300)


def _state(home: Path, job_id: str) -> tuple[str, str]:
    done = _aiptrain(home, "jobs", "describe", job_id, "--format", "json")
    resource = json.loads(done.stdout)
    return resource["state"], resource.get("errorMessage", "")


def _no_process_of(home: Path) -> bool:
    """No process runs for this home: its supervisor names it, its replicas have it in their environment."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if str(home).encode() in (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes():
                return False
    return True


# The trainer marks that it runs (its cwd is work/master-replica-0), then prints without end.
CHATTY = ("import pathlib, itertools\npathlib.Path('../started').touch()\n"
          "for i in itertools.count():\n    print(f'line {i} ' + 'x' * 60)\n")
QUIET = "import pathlib, time\npathlib.Path('../started').touch()\nprint('waiting', flush=True)\ntime.sleep(600)\n"


def test_a_job_whose_logs_meet_a_full_disk_fails_saying_so(roomy_home: Path, tmp_path: Path) -> None:
    _submit(roomy_home, tmp_path, "chatty", CHATTY)
    _fill(roomy_home)
    wait_until(lambda: _state(roomy_home, "chatty")[0] == "FAILED", 60, "the job to fail")
    message = _state(roomy_home, "chatty")[1]
    assert message.startswith(f"no space left on {roomy_home}: the job's log lines cannot be stored")
    assert "master-replica-0: line " in message  # its last lines, kept in memory
    wait_until(lambda: _no_process_of(roomy_home), 30, "the supervisor and the trainer to be gone")


def test_a_cancel_on_a_full_disk_still_stops_the_job(roomy_home: Path, tmp_path: Path) -> None:
    _submit(roomy_home, tmp_path, "quiet", QUIET)
    # Its last line is stored before the disk fills: from then on it writes nothing.
    wait_until(lambda: "\twaiting" in _aiptrain(roomy_home, "jobs", "logs", "quiet", "--timeout", "1").stdout, 60,
               "its line")
    _fill(roomy_home)
    cancelled = _aiptrain(roomy_home, "jobs", "cancel", "quiet")
    # Recording the request needs room; the supervisor is told anyway, and the user is told so.
    if cancelled.returncode != 0:
        assert cancelled.returncode == 1
        assert f"no space left on {roomy_home} to record the cancel of job 'quiet'" in cancelled.stderr
    assert "Traceback" not in cancelled.stderr
    # The supervisor's reserve leaves room for the job's end.
    wait_until(lambda: _state(roomy_home, "quiet")[0] == "CANCELLED", 60, "the job to be CANCELLED")
    wait_until(lambda: _no_process_of(roomy_home), 30, "the supervisor and the trainer to be gone")


def test_a_submit_without_room_says_so_and_writes_nothing(small_home: Path, tmp_path: Path) -> None:
    package = tmp_path / "project" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("print('hi')\n")
    (package / "data.bin").write_bytes(os.urandom(3 * 1024 * 1024))  # incompressible: the sdist is 3 MB
    env = {**os.environ, "AIPTRAIN_HOME": str(small_home)}
    done = subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "submit", "training", "no_room",
                           "--package-path", str(package), "--module-name", "trainer.task", "--region",
                           "us-central1", "--staging-bucket", "gs://room-bucket"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert f"no space left on {small_home}" in done.stderr
    assert "nothing was uploaded or created" in done.stderr and "AIPTRAIN_HOME" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (small_home / "storage" / "room-bucket").exists()
    assert not (small_home / "jobs.db").exists()
