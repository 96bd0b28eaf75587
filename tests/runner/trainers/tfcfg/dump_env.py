"""Writes what this replica was given (TF_CONFIG, CLUSTER_SPEC, AIP_*, argv, cwd) to JOB_DIR/env/.

The primary waits until `--expect N` replicas have written theirs, so none is stopped early.
"""

from __future__ import annotations

import json
import os
import sys

from tfcfg._common import job_dir, primary_waits_for_reports, task_name, write_json

VARIABLES = ("CLOUD_ML_JOB_ID", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR",
             "PYTHONPATH", "PYTHONUNBUFFERED", "CLOUD_ML_TRIAL_ID")


def main() -> None:
    out = job_dir() / "env"
    record = {
        "TF_CONFIG": json.loads(os.environ["TF_CONFIG"]),
        "CLUSTER_SPEC": json.loads(os.environ.get("CLUSTER_SPEC") or "null"),  # not in `local train`
        "env": {name: os.environ.get(name) for name in VARIABLES},
        "argv": sys.argv[1:],
        "cwd": os.getcwd(),
        "module_file": __file__,
    }
    write_json(out / f"{task_name()}.json", record)
    print(f"wrote {task_name()}")
    primary_waits_for_reports(out)


if __name__ == "__main__":
    main()
