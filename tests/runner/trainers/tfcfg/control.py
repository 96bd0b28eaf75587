"""A trainer the fault tests steer through files in its job dir.

Every replica records its pid in JOB_DIR/pids/<task> and one line per start in
JOB_DIR/starts/<task>. The primary waits for JOB_DIR/release, then exits with `--exit-code`
(or raises `--fail-with MESSAGE`); the others run until they are stopped. `--escapee` makes a
replica start a child in a session of its own (as a careless trainer might), whose pid goes to
JOB_DIR/escapees/<task>.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

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
    if is_primary():
        wait_for(lambda: (directory / "release").exists(), timeout=600)
        message = flag("fail-with")
        if message:
            raise RuntimeError(message)
        sys.exit(int(flag("exit-code", "0") or "0"))
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
