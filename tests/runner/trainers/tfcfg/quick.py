"""Records when it ran (JOB_DIR/times.json) and exits after a short nap."""

from __future__ import annotations

import time

from tfcfg._common import job_dir, write_json


def main() -> None:
    start = time.time()
    time.sleep(0.3)
    write_json(job_dir() / "times.json", {"start": start, "end": time.time()})
    print("quick done")


if __name__ == "__main__":
    main()
