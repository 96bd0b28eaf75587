"""A trainer in runtime 1.15's idiom: tf.app.flags, tf.logging, tf.contrib.training.HParams, a
model_fn with a tf.train optimizer, and tf.estimator.train_and_evaluate distributing itself from
TF_CONFIG (master, workers and parameter servers of STANDARD_1)."""

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf.app.flags.DEFINE_integer("train_steps", 40, "Training steps.")
tf.app.flags.DEFINE_float("learning_rate", 0.1, "Learning rate of the SGD optimizer.")
FLAGS = tf.app.flags.FLAGS


def input_fn():
    x = np.linspace(-1.0, 1.0, 64).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, 3.0 * x + 1.0)).repeat().batch(16)


def model_fn(features, labels, mode, params):
    weight = tf.get_variable("weight", [], initializer=tf.zeros_initializer())
    bias = tf.get_variable("bias", [], initializer=tf.zeros_initializer())
    predictions = weight * features["x"] + bias
    loss = tf.losses.mean_squared_error(labels, predictions)
    optimizer = tf.train.GradientDescentOptimizer(params.learning_rate)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)


def train(job_dir):
    hparams = tf.contrib.training.HParams(learning_rate=FLAGS.learning_rate)
    config = tf.estimator.RunConfig(model_dir=os.path.join(job_dir, "model"), save_checkpoints_steps=10)
    estimator = tf.estimator.Estimator(model_fn, params=hparams, config=config)
    tf.estimator.train_and_evaluate(
        estimator,
        tf.estimator.TrainSpec(input_fn, max_steps=FLAGS.train_steps),
        tf.estimator.EvalSpec(input_fn, steps=2, throttle_secs=1),
    )
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    tf.logging.info("trained with %s", hparams.to_json())
    print("tf1 estimator %s %d finished on TensorFlow %s" % (task["type"], task["index"], tf.__version__))
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    known, rest = parser.parse_known_args()
    tf.logging.set_verbosity(tf.logging.INFO)
    FLAGS(sys.argv[:1] + rest)
    train(known.job_dir)


if __name__ == "__main__":
    main()
