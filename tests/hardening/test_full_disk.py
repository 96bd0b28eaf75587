"""A submit onto a file system without room says so before writing anything.

AIPTRAIN_HOME sits on a small tmpfs (root can mount one here); where mounting is not allowed, a
loop-mounted file system would do, and without either the test is skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture
def small_home(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    reason = _mount_tmpfs(mount_point, SMALL)
    if reason is not None:
        pytest.skip(reason)
    try:
        yield mount_point / "home"
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


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
