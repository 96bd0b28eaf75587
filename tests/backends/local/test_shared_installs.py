"""Jobs of one package share its installed files by content (hard links to the install cache's
entry): two such jobs take the disk of one, and pruning one, or emptying the cache, leaves the
other's site whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.fixtures.engine import wait_until

PROJECT = "shared-project"
# A module big enough that a copy per job would show: about 1 MB of source (and its bytecode).
BIG_MODULE = "BLOB = (\n" + "".join(f"    {'x' * 100!r}\n" for _ in range(10_000)) + ")\n"


def _aiptrain(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", "--project", PROJECT, *argv], capture_output=True,
                          text=True, timeout=240, env={**os.environ})


def _files(site: Path) -> list[os.stat_result]:
    return [os.lstat(os.path.join(root, name)) for root, _dirs, names in os.walk(site) for name in names]


def _bytes_on_disk(*sites: Path) -> int:
    """Bytes of the distinct files (by inode) under the sites: a file linked twice counts once."""
    distinct = {(stat.st_dev, stat.st_ino): stat.st_size for site in sites for stat in _files(site)}
    return sum(distinct.values())


def test_two_jobs_of_one_package_take_the_disk_of_one(trainer: Path, home: Path) -> None:
    (trainer / "big.py").write_text(BIG_MODULE)
    for job_id in ("first", "second"):
        ran = _aiptrain("jobs", "submit", "training", job_id, "--package-path", str(trainer), "--module-name",
                        "trainer.task", "--region", "us-central1", "--stream-logs")
        assert ran.returncode == 0, ran.stderr
        assert f"hello from {job_id}" in ran.stdout + ran.stderr
    first, second = (home / "jobs" / PROJECT / job_id / "site" for job_id in ("first", "second"))
    one_site = sum(stat.st_size for stat in _files(first))
    assert one_site > 1_000_000
    assert sum(stat.st_size for stat in _files(second)) == one_site
    assert _bytes_on_disk(first, second) == one_site  # a copy per job would be twice that
    # The supervisor outlives the streamed end by a moment, holding its disk reserve until it exits.
    wait_until(lambda: not any((home / "jobs" / PROJECT).glob("*/space-reserve")), timeout=60,
               what="the supervisors to exit")
    usage = _aiptrain("local", "disk-usage", "--format", "json")
    assert usage.returncode == 0, usage.stderr
    parts = {part["part"]: part["bytes"] for part in json.loads(usage.stdout)["parts"]}
    assert parts["installed-package cache"] >= one_site
    assert parts["job directories"] < one_site / 10  # the linked packages are counted once, in the cache

    pruned = _aiptrain("local", "prune", "first")
    assert pruned.returncode == 0, pruned.stderr
    assert not first.exists()
    shutil.rmtree(home / "cache" / "site")  # the cache's entries may go too: a link keeps its file
    rerun = subprocess.run([sys.executable, "-c", "import trainer.big, trainer.task"], capture_output=True, text=True,
                           timeout=60, cwd=home, env={**os.environ, "PYTHONPATH": str(second)})
    assert rerun.returncode == 0, rerun.stderr
    assert "bye" in rerun.stdout
    assert sum(stat.st_size for stat in _files(second)) == one_site
