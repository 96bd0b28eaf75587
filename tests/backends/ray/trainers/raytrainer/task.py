"""A trainer without TensorFlow for the Ray tests about the job's life, not about training.

It prints `[TYPE:INDEX] started at ADDRESS on Python X.Y` with its TF_CONFIG task and its own
address in TF_CONFIG's cluster, and `[TYPE:INDEX] temporary directory DIR`, then `[TYPE:INDEX] step N` every
`--step-seconds` until `--steps` steps are done (0: until it is stopped). With `--import-probe`
it first imports `aiptrain_ray_probe` (a package only the runtime's package list provides) and
prints what it holds and which Python runs it. With `--rendezvous`, each replica leaves a marker in
`--job-dir` once started, and the primary finishes only when every replica of the cluster has
(its end stops the others, which must have had their say).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _rendezvous(job_dir: Path, task: dict[str, Any], cluster: dict[str, list[str]]) -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / f"started-{task.get('type')}-{task.get('index')}").touch()
    if task.get("type") not in ("chief", "master"):
        return
    everyone = sum(len(addresses) for addresses in cluster.values())
    deadline = time.monotonic() + 300
    while len(list(job_dir.glob("started-*"))) < everyone and time.monotonic() < deadline:
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--step-seconds", type=float, default=0.5)
    parser.add_argument("--import-probe", action="store_true")
    parser.add_argument("--rendezvous", action="store_true")
    args = parser.parse_args()
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task", {})
    name = f"[{task.get('type', 'master')}:{task.get('index', 0)}]"
    if args.import_probe:
        import aiptrain_ray_probe  # type: ignore[import-not-found]

        print(f"{name} probe says {aiptrain_ray_probe.MESSAGE} (python {sys.executable})", flush=True)
    addresses = tf_config.get("cluster", {}).get(task.get("type"), [])
    address = addresses[task.get("index", 0)] if len(addresses) > task.get("index", 0) else "?"
    print(f"{name} started at {address} on Python {sys.version_info[0]}.{sys.version_info[1]} ({sys.executable})",
          flush=True)
    print(f"{name} temporary directory {tempfile.gettempdir()}", flush=True)
    if args.rendezvous and args.job_dir:
        _rendezvous(Path(args.job_dir), task, tf_config.get("cluster", {}))
    step = 0
    while args.steps == 0 or step < args.steps:
        step += 1
        time.sleep(args.step_seconds)
        print(f"{name} step {step}", flush=True)
    print(f"{name} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
