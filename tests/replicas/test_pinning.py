"""The replica launcher pins a replica to its cores before the replica's first thread starts.

What each replica of a real job is given as its share is in tests/backends/local/test_machine_share.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from aiptrain._replicas.command import ProcessCommand
from aiptrain._replicas.replica_set import ProcessLauncher
from aiptrain._replicas.this_machine import usable_cores


def test_a_replica_starts_pinned_to_its_cores(tmp_path: Path) -> None:
    """The launcher pins the replica before its first thread starts: every thread it makes inherits that."""
    last = usable_cores()[-1]
    launcher = ProcessLauncher({"master-replica-0": (last,)})
    probe = ("import json, os, threading; seen = []\n"
             "thread = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
             "thread.start(); thread.join(); print(json.dumps([sorted(os.sched_getaffinity(0)), seen[0]]))")
    (tmp_path / "probe.py").write_text(probe)  # `-m` finds it in the replica's working directory
    command = ProcessCommand(sys.executable, "probe")
    pinned = launcher.start("master-replica-0", command, dict(os.environ), tmp_path)
    free = launcher.start("worker-replica-0", command, dict(os.environ), tmp_path)
    try:
        assert json.loads(pinned.stdout.read()) == [[last], [last]]
        assert json.loads(free.stdout.read()) == [list(usable_cores()), list(usable_cores())]
    finally:
        for process in (pinned, free):
            process.reap()
