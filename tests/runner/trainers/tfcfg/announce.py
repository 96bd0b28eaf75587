"""For `local train`: says who it is and what TF_CONFIG it got, records its pid in JOB_DIR/ready/.

The primary waits until `--expect N` replicas are ready, then exits with `--exit-code` (or
kills itself with `--signal N`);
the others wait to be stopped.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tfcfg._common import flag, is_primary, job_dir, task_name, tf_config, wait_for, write_json


def main() -> None:
    name = task_name()
    print(f"hello from {name}", flush=True)
    print(f"TF_CONFIG {json.dumps(tf_config())}", flush=True)
    print(f"args {json.dumps(sys.argv[1:])}", flush=True)
    print(f"cwd {json.dumps(os.getcwd())}", flush=True)
    print(f"a warning from {name}", file=sys.stderr, flush=True)
    ready = job_dir() / "ready"
    write_json(ready / name, os.getpid())
    if is_primary():
        expected = int(flag("expect", "1") or "1")
        wait_for(lambda: len([p for p in ready.iterdir() if not p.name.endswith(".tmp")]) >= expected)
        if flag("signal"):
            os.kill(os.getpid(), int(flag("signal") or "0"))
        sys.exit(int(flag("exit-code", "0") or "0"))
    while True:
        time.sleep(0.2)


if __name__ == "__main__":
    main()
