"""Run by bench/rows/gcs_endpoint.py in a TensorFlow process: tf.io.gfile throughput, alternated.

    python gcs_endpoint_io.py LOCAL_DIR GS_DIR SIZE_BYTES RUNS

LOCAL_DIR and GS_DIR name the same folder of the local store (a path, and its gs:// URI reached
through the job's storage endpoint). Each run writes a file of SIZE_BYTES with `tf.io.gfile.GFile`
and reads it back, once through each; which side goes first alternates. Prints one JSON object
of MB/s samples: {"write": {"local": [...], "gs": [...]}, "read": {...}}.
"""

from __future__ import annotations

import json
import os
import sys
import time

import tensorflow as tf  # noqa: TID251 - run in a trainer-like process, never imported by aiptrain

MB = 1_000_000


def write(path: str, payload: bytes) -> float:
    start = time.perf_counter()
    with tf.io.gfile.GFile(path, "wb") as out:
        out.write(payload)
    return len(payload) / MB / (time.perf_counter() - start)


def read(path: str, size: int) -> float:
    start = time.perf_counter()
    with tf.io.gfile.GFile(path, "rb") as source:
        data = source.read()
    elapsed = time.perf_counter() - start
    if len(data) != size:
        raise SystemExit(f"read {len(data)} bytes of {size} from {path}")
    return size / MB / elapsed


def main(local_dir: str, gs_dir: str, size: int, runs: int) -> None:
    payload = os.urandom(size)
    samples: dict[str, dict[str, list[float]]] = {"write": {"local": [], "gs": []}, "read": {"local": [], "gs": []}}
    for index in range(runs + 1):  # the first pair warms both sides up and is dropped
        order = [("local", local_dir), ("gs", gs_dir)]
        if index % 2:
            order.reverse()
        for side, folder in order:
            name = f"{folder}/payload-{index}.bin"
            written = write(name, payload)
            got = read(name, size)
            if index:
                samples["write"][side].append(written)
                samples["read"][side].append(got)
    print(json.dumps(samples), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
