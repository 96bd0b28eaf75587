"""Writes (and prints) this replica's share of the machine: the variables that size its thread
pools and choose its GPUs, and the cores it may run on, to JOB_DIR/share/<task>.json.

The primary waits until `--expect N` replicas have written theirs, so none is stopped early.
"""

from __future__ import annotations

import os

from tfcfg._common import job_dir, primary_waits_for_reports, task_name, write_json

VARIABLES = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "TF_FORCE_GPU_ALLOW_GROWTH")


def main() -> None:
    out = job_dir() / "share"
    got = {name: os.environ.get(name) for name in VARIABLES}
    cores = sorted(os.sched_getaffinity(0))
    write_json(out / f"{task_name()}.json", {"env": got, "cores": cores})
    print(f"{task_name()} got cores {cores} " + " ".join(f"{name}={value}" for name, value in got.items()))
    primary_waits_for_reports(out)


if __name__ == "__main__":
    main()
