"""A trainer in Python 2 only, as many of runtime 1.x's were (a print statement, dict.iteritems,
unicode): a canned estimator trained with train_and_evaluate, between-graph replication when
TF_CONFIG names a cluster. The master writes what it ran on to report.json in --job-dir."""

import argparse
import json
import os
import platform

import numpy as np
import tabulate
import tensorflow as tf


def input_fn():
    x = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, 3.0 * x + 1.0))
    return dataset.repeat().batch(16)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--train-steps", type=int, default=20)
    args = parser.parse_args()
    config = tf.estimator.RunConfig(model_dir=os.path.join(args.job_dir, "model"), save_checkpoints_steps=10)
    model = tf.estimator.LinearRegressor(feature_columns=[tf.feature_column.numeric_column("x")], config=config)
    tf.estimator.train_and_evaluate(
        model,
        tf.estimator.TrainSpec(input_fn, max_steps=args.train_steps),
        tf.estimator.EvalSpec(input_fn, steps=2, throttle_secs=1),
    )
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] == "master":
        report = {"python": platform.python_version(), "tensorflow": tf.__version__, "tabulate": tabulate.__version__}
        with tf.gfile.GFile(os.path.join(args.job_dir, "report.json"), "w") as out:
            out.write(json.dumps(dict((unicode(k), unicode(v)) for k, v in report.iteritems())))
    print "py2 trainer %s %d finished on TensorFlow %s" % (task["type"], task["index"], tf.__version__)


if __name__ == "__main__":
    main()
