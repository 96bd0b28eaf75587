"""An evaluator that finishes its last evaluation after the primary is done.

The primary waits for JOB_DIR/evaluator-ready, writes JOB_DIR/master-done and exits. The
evaluator then takes a moment and writes JOB_DIR/evaluated, unless `--evaluator-hangs`.
"""

from __future__ import annotations

import sys
import time

from tfcfg._common import is_primary, job_dir, wait_for


def main() -> None:
    directory = job_dir()
    if is_primary():
        wait_for(lambda: (directory / "evaluator-ready").exists())
        (directory / "master-done").touch()
        return
    (directory / "evaluator-ready").touch()
    wait_for(lambda: (directory / "master-done").exists(), timeout=600)
    if "--evaluator-hangs" in sys.argv:
        time.sleep(600)
    time.sleep(1.0)
    (directory / "evaluated").touch()
    print("final evaluation written")


if __name__ == "__main__":
    main()
