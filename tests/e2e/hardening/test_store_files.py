"""The job store's files are private from their first byte, whatever the umask: jobs.db and the
-wal and -shm files SQLite makes beside it (they hold the same rows: labels, args, log lines)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

STORE_FILES = ("jobs.db", "jobs.db-wal", "jobs.db-shm")


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask-022", "umask-000"])
def test_a_new_store_is_private(tmp_path: Path, umask: int) -> None:
    home = tmp_path / "home"
    # A separate process: the umask is process-wide, and the store is opened as a user's command would.
    script = ("import os, sys\nos.umask(int(sys.argv[2]))\nfrom pathlib import Path\n"
              "from aiptrain._backends.local.store import JobStore\n"
              "store = JobStore(Path(sys.argv[1]))\nprint(len(store.active_jobs()), flush=True)\n"
              "sys.stdin.read()\n")  # the store stays open (its -wal and -shm exist) until stdin closes
    opened = subprocess.Popen([sys.executable, "-c", script, str(home), str(umask)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert opened.stdout is not None
        assert opened.stdout.readline().strip() == "0"
        found = [name for name in STORE_FILES if (home / name).exists()]
        assert found == list(STORE_FILES)  # WAL mode: the side files were made
        modes = {name: stat.S_IMODE((home / name).stat().st_mode) for name in found}
    finally:
        opened.communicate("", timeout=60)
    assert modes == dict.fromkeys(STORE_FILES, 0o600)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_an_older_store_is_made_private_when_opened(tmp_path: Path) -> None:
    from aiptrain._backends.local.store import JobStore

    home = tmp_path / "home"
    JobStore(home).close()
    for name in STORE_FILES:
        if (home / name).exists():
            os.chmod(home / name, 0o644)
    JobStore(home).close()
    for name in STORE_FILES:
        if (home / name).exists():
            assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
