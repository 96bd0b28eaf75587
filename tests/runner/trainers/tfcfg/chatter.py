"""Writes lines of every kind the log capture classifies, then timestamped ticks.

Other replicas say one line and touch JOB_DIR/said/<task>; the primary waits for them first, so
every replica is in the log before the primary ends the job.
"""

from __future__ import annotations

import json
import sys
import time
import traceback

from tfcfg._common import flag, is_primary, job_dir, task_name, tf_config, wait_for


def speak_as_secondary() -> None:
    print(f"{task_name()} says hi", flush=True)
    said = job_dir() / "said"
    said.mkdir(parents=True, exist_ok=True)
    (said / task_name()).touch()
    while True:
        time.sleep(0.2)


def main() -> None:
    if not is_primary():
        speak_as_secondary()
    print("plain stdout line")
    print("plain stderr line", file=sys.stderr, flush=True)
    print(json.dumps({"severity": "WARNING", "message": "structured warning"}))
    print(json.dumps({"severity": "debug", "message": "structured debug", "extra": 1}))
    try:
        raise ValueError("caught on purpose")
    except ValueError:
        traceback.print_exc(file=sys.stdout)
    print("after the traceback")
    others = len(tf_config().get("cluster", {}).get("worker", []))
    if others:
        said = job_dir() / "said"
        wait_for(lambda: said.is_dir() and len(list(said.iterdir())) >= others)
    for index in range(int(flag("ticks", "0") or "0")):
        print(f"TICK {index} {time.time():.6f}")
        time.sleep(0.2)
    print("chatter done")


if __name__ == "__main__":
    main()
