"""A trainer that reports only through TensorFlow summaries, as many AI Platform samples did.

It writes `accuracy` (a TF 2 scalar tensor) to `<--job-dir>/logs/validation` at steps 0, 1 and 2:
first 5.0 (higher than any final value, so a reader taking the best instead of the last is
caught), then 0.0, then `1 - (x - 0.3)^2`. A `loss` scalar under `logs/train` is a distractor.
Nothing goes through cloudml-hypertune.
"""

from __future__ import annotations

import argparse

import tensorflow as tf


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--x", type=float, required=True)
    args = parser.parse_args()
    final = 1.0 - (args.x - 0.3) ** 2
    validation = tf.summary.create_file_writer(f"{args.job_dir.rstrip('/')}/logs/validation")
    train = tf.summary.create_file_writer(f"{args.job_dir.rstrip('/')}/logs/train")
    for step, accuracy in enumerate([5.0, 0.0, final]):
        with validation.as_default():
            tf.summary.scalar("accuracy", accuracy, step=step)
        with train.as_default():
            tf.summary.scalar("loss", 10.0 + step, step=step)
    validation.close()
    train.close()


if __name__ == "__main__":
    main()
