"""A TF-1-style canned estimator trained with tf.compat.v1.estimator.train_and_evaluate.

Run as STANDARD_1 it is between-graph replication with parameter servers, configured by
TF_CONFIG alone, as trainers for runtime 1.x/2.x did it.
"""

import argparse
import json
import os

import numpy as np
import tensorflow as tf


def input_fn():
    x = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, 3.0 * x + 1.0))
    return dataset.repeat().batch(16)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--train-steps", type=int, default=30)
    args = parser.parse_args()
    estimator_api = tf.compat.v1.estimator
    config = estimator_api.RunConfig(model_dir=os.path.join(args.job_dir, "model"), save_checkpoints_steps=10)
    model = estimator_api.LinearRegressor(feature_columns=[tf.feature_column.numeric_column("x")], config=config)
    estimator_api.train_and_evaluate(
        model,
        estimator_api.TrainSpec(input_fn, max_steps=args.train_steps),
        estimator_api.EvalSpec(input_fn, steps=2, throttle_secs=1),
    )
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print(f"estimator {task['type']} {task['index']} finished on TensorFlow {tf.__version__}", flush=True)


if __name__ == "__main__":
    main()
