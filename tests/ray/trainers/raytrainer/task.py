"""A trainer without TensorFlow for the Ray tests about the job's life, not about training.

It prints `[TYPE:INDEX] started` with its TF_CONFIG task, then `[TYPE:INDEX] step N` every
`--step-seconds` until `--steps` steps are done (0: until it is stopped). With `--import-probe`
it first imports `aiptrain_ray_probe` (a package only the runtime's package list provides) and
prints what it holds and which Python runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--step-seconds", type=float, default=0.5)
    parser.add_argument("--import-probe", action="store_true")
    args = parser.parse_args()
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
    name = f"[{task.get('type', 'master')}:{task.get('index', 0)}]"
    if args.import_probe:
        import aiptrain_ray_probe  # type: ignore[import-not-found]

        print(f"{name} probe says {aiptrain_ray_probe.MESSAGE} (python {sys.executable})", flush=True)
    print(f"{name} started", flush=True)
    step = 0
    while args.steps == 0 or step < args.steps:
        step += 1
        time.sleep(args.step_seconds)
        print(f"{name} step {step}", flush=True)
    print(f"{name} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
