"""A trainer the fault tests steer through files in its job dir.

Every replica records its pid in JOB_DIR/pids/<task> and one line per start in
JOB_DIR/starts/<task>. The primary waits for JOB_DIR/release, then exits with `--exit-code`
(or raises `--fail-with MESSAGE`); the others run until they are stopped. `--escapee` makes a
replica start a child in a session of its own (as a careless trainer might), whose pid goes to
JOB_DIR/escapees/<task>; `--hidden-escapee` also clears that child's environment. With
`--fail-if-peer-dies` the primary exits 1 once a worker it saw running is gone, as a synchronous
trainer's collectives fail when a peer dies (it marks each worker pid it has seen in
JOB_DIR/seen/). With `--secondary-fail-with MESSAGE` every other replica raises at once (a
worker's own bug).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tfcfg._common import flag, is_primary, job_dir, task_name, wait_for, write_json


def main() -> None:
    directory = job_dir()
    task = task_name()
    write_json(directory / "pids" / task, os.getpid())
    starts = directory / "starts" / task
    starts.parent.mkdir(parents=True, exist_ok=True)
    with starts.open("a") as handle:
        handle.write(f"{os.getpid()}\n")
    print(f"{task} started", flush=True)
    if "--escapee" in sys.argv:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        write_json(directory / "escapees" / task, child.pid)
    if not is_primary() and flag("secondary-fail-with"):
        raise RuntimeError(flag("secondary-fail-with"))
    if "--hidden-escapee" in sys.argv:
        # setsid and an empty environment: neither the replica's group nor the run token reach it.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                                 env={})
        write_json(directory / "escapees" / task, child.pid)
    if is_primary():
        if "--fail-if-peer-dies" in sys.argv:
            _wait_for_release_unless_a_peer_dies(directory)
        wait_for(lambda: (directory / "release").exists(), timeout=600)
        message = flag("fail-with")
        if message:
            raise RuntimeError(message)
        sys.exit(int(flag("exit-code", "0") or "0"))
    while True:
        time.sleep(0.2)


def _wait_for_release_unless_a_peer_dies(directory: Path) -> None:
    seen_alive: set[int] = set()
    while not (directory / "release").exists():
        for record in (directory / "pids").glob("worker-replica-*"):
            try:
                pid = int(record.read_text())
            except ValueError:
                continue  # being written
            if os.path.exists(f"/proc/{pid}") and _state(pid) != "Z":
                if pid not in seen_alive:
                    seen_alive.add(pid)
                    # A test kills the peer only after this, or the primary could miss its death.
                    (directory / "seen").mkdir(exist_ok=True)
                    (directory / "seen" / str(pid)).touch()
            elif pid in seen_alive:
                print(f"lost {record.name}", file=sys.stderr, flush=True)
                sys.exit(1)
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


if __name__ == "__main__":
    main()
