"""The last value of one scalar in a trial's TensorFlow summary events: a script for the trial's Python.

aiptrain never imports TensorFlow. The tuning engine runs this file with the interpreter that ran
the trial (which has TensorFlow, since the trial wrote summaries with it) and reads one JSON line:

    python summary_events.py DIRECTORY TAG
    -> {"step": 120, "value": 0.93, "wall_time": 1700000000.5, "file": "..."}   or {} if no event has TAG

Every `*.tfevents.*` file under DIRECTORY (a local path or gs://, walked recursively, e.g.
`logs/train` and `logs/validation` of a Keras TensorBoard callback) is read with TensorFlow's own
reader, `tf.compat.v1.train.summary_iterator`. Both kinds of scalars count: TF 1 `simple_value`s
and TF 2 `tf.summary.scalar` tensors. The value reported is the last one written (latest wall
time, then highest step), as the service took the last value of `hyperparameterMetricTag`. A file
cut short (a trainer killed while writing) yields the events before the cut.

It imports nothing from aiptrain, so it runs in any interpreter with TensorFlow.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def last_scalar(directory: str, tag: str) -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    best: tuple[float, int, float, str] | None = None
    if not tf.io.gfile.isdir(directory):
        return {}
    for folder, _subfolders, files in tf.io.gfile.walk(directory):
        for name in files:
            if ".tfevents." not in name:
                continue
            path = f"{folder.rstrip('/')}/{name}"
            try:
                for event in tf.compat.v1.train.summary_iterator(path):
                    for value in event.summary.value:
                        if value.tag != tag:
                            continue
                        try:
                            number = (float(value.simple_value) if value.HasField("simple_value")
                                      else float(tf.make_ndarray(value.tensor)))
                        except (ValueError, TypeError):
                            continue  # not a scalar (a histogram or an image under the same tag)
                        candidate = (float(event.wall_time), int(event.step), number, path)
                        if best is None or candidate[:2] >= best[:2]:
                            best = candidate
            except tf.errors.OpError:
                continue  # a file cut short: keep what was read before the cut
    if best is None:
        return {}
    wall_time, step, number, path = best
    return {"step": step, "value": number, "wall_time": wall_time, "file": path}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: summary_events.py DIRECTORY TAG", file=sys.stderr)
        return 2
    print(json.dumps(last_scalar(argv[1], argv[2])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
