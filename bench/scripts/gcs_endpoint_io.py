"""Run by bench/rows/gcs_endpoint.py in a TensorFlow process: tf.io.gfile throughput, alternated.

    python gcs_endpoint_io.py big LOCAL_DIR GS_DIR SIZE_BYTES RUNS
    python gcs_endpoint_io.py small LOCAL_DIR GS_DIR FILES RUNS

LOCAL_DIR and GS_DIR name the same folder of the local store (a path, and its gs:// URI reached
through the job's storage endpoint); which side goes first alternates, and the first pair warms
both up and is dropped.

- `big`: each run writes a file of SIZE_BYTES with `tf.io.gfile.GFile` and reads it back, once
  through each side. Prints {"write": {"local": [MB/s...], "gs": [...]}, "read": {...}}.
- `small`: each run writes FILES files of 1 kB, then reads them all back, on each side. Prints
  {"write": {"local": [ms per file...], "gs": [...]}, "read": {...}}.

Python 3.7 and TensorFlow 1.15 run it too (runtime 1.15's environment), so nothing newer is used.
"""

from __future__ import annotations

import json
import os
import sys
import time

import tensorflow as tf  # noqa: TID251 - run in a trainer-like process, never imported by aiptrain

MB = 1_000_000
SMALL = 1000


def write(path: str, payload: bytes) -> float:
    start = time.perf_counter()
    with tf.io.gfile.GFile(path, "wb") as out:
        out.write(payload)
    return time.perf_counter() - start


def read(path: str, size: int) -> float:
    start = time.perf_counter()
    with tf.io.gfile.GFile(path, "rb") as source:
        data = source.read()
    elapsed = time.perf_counter() - start
    if len(data) != size:
        raise SystemExit(f"read {len(data)} bytes of {size} from {path}")
    return elapsed


def big_run(folder: str, index: int, payload: bytes) -> tuple[float, float]:
    """(write, read) MB/s of one file of len(payload) bytes."""
    name = f"{folder}/payload-{index}.bin"
    return len(payload) / MB / write(name, payload), len(payload) / MB / read(name, len(payload))


def small_run(folder: str, index: int, files: int) -> tuple[float, float]:
    """(write, read) milliseconds per file of `files` files of 1 kB."""
    payload = os.urandom(SMALL)
    tf.io.gfile.makedirs(f"{folder}/small-{index}")
    names = [f"{folder}/small-{index}/part-{number:05d}.csv" for number in range(files)]
    written = sum(write(name, payload) for name in names)
    got = sum(read(name, SMALL) for name in names)
    return written * 1000 / files, got * 1000 / files


def main(mode: str, local_dir: str, gs_dir: str, amount: int, runs: int) -> None:
    payload = os.urandom(amount) if mode == "big" else b""
    samples = {"write": {"local": [], "gs": []}, "read": {"local": [], "gs": []}}  # type: dict[str, dict[str, list[float]]]
    for index in range(runs + 1):
        order = [("local", local_dir), ("gs", gs_dir)]
        if index % 2:
            order.reverse()
        for side, folder in order:
            written, got = big_run(folder, index, payload) if mode == "big" else small_run(folder, index, amount)
            if index:
                samples["write"][side].append(written)
                samples["read"][side].append(got)
    print(json.dumps(samples), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
