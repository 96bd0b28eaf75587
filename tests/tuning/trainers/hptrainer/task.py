"""Reports objective(x, y, kind) through cloudml-hypertune and records what it was given.

`--mode` picks a behaviour: `ok` (the default) reports the objective at every step and exits 0;
`fail...` exits 3 at once; `stall...` reports a bad value, then keeps running (until SIGTERM);
`good-N` reports N at every step. The record (argv, TF_CONFIG, environment, start/end times,
SIGTERM) is written to `<--job-dir>/record.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from hptrainer.objective import objective


def _local(job_dir: str) -> Path:
    """Where the local store keeps a gs:// --job-dir (handed over unchanged, as on the service):
    the record is written with plain file I/O, for the tests to read."""
    if job_dir.startswith("gs://"):
        return Path(os.environ["AIPTRAIN_HOME"]) / "storage" / job_dir[len("gs://"):]
    return Path(job_dir)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir")
    parser.add_argument("--x", type=float, default=0.0)
    parser.add_argument("--y", type=int, default=0)
    parser.add_argument("--kind", default="a")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=0.0)
    parser.add_argument("--tag", default="training/hptuning/metric")
    args = parser.parse_args()

    record: dict[str, Any] = {
        "argv": sys.argv[1:],
        "tf_config": json.loads(os.environ.get("TF_CONFIG") or "{}"),
        "trial": os.environ.get("CLOUD_ML_TRIAL_ID"),
        "metric_file": os.environ.get("CLOUD_ML_HP_METRIC_FILE"),
        "aip_model_dir": os.environ.get("AIP_MODEL_DIR"),
        "job_dir": args.job_dir,
        "start": time.time(),
    }
    # The trial's own directory: Vertex gives every trial the same --job-dir (if the job passes one
    # at all) and its own AIP_MODEL_DIR (TRIAL_DIR/model/), as the local backend does too.
    model_dir = os.environ.get("AIP_MODEL_DIR")
    # The parent as a string: Path() would fold a gs:// URI's double slash.
    output_dir = model_dir.rstrip("/").rsplit("/", 1)[0] if model_dir else args.job_dir
    target = _local(output_dir) / "record.json" if output_dir else None

    def save() -> None:
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(record))

    def on_sigterm(signum: int, frame: Any) -> None:
        record["sigterm"] = time.time()
        save()
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_sigterm)
    save()
    print(f"trial {record['trial']}: {' '.join(sys.argv[1:])}", flush=True)
    if args.mode.startswith("fail"):
        print(f"failing on purpose ({args.mode})", file=sys.stderr, flush=True)
        return 3

    import hypertune

    reporter = hypertune.HyperTune()
    if args.mode.startswith("stall"):
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag=args.tag, metric_value=-100.0, global_step=1)
        time.sleep(120)
        return 0
    value = float(args.mode.split("-", 1)[1]) if args.mode.startswith("good-") else objective(
        args.x, args.y, args.kind, args.lr)
    for step in range(1, args.steps + 1):
        time.sleep(args.step_seconds)
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag=args.tag, metric_value=value, global_step=step)
    record["end"] = time.time()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
