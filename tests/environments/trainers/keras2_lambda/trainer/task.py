"""Keras 2 as a runtime 2.1 trainer used it: feature columns through DenseFeatures, then a Lambda
without output_shape (Keras 3 has neither DenseFeatures nor shape inference for such a Lambda)."""

import argparse
import json
import os

import numpy as np
import tensorflow as tf


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    columns = [tf.feature_column.numeric_column("a"), tf.feature_column.numeric_column("b")]
    inputs = {name: tf.keras.Input(shape=(1,), name=name) for name in ("a", "b")}
    features = tf.keras.layers.DenseFeatures(columns)(inputs)
    squared = tf.keras.layers.Lambda(lambda t: tf.concat([t, t * t], axis=1))(features)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(squared))
    model.compile(optimizer="sgd", loss="mse")
    rng = np.random.RandomState(0)
    data = {"a": rng.rand(32, 1).astype(np.float32), "b": rng.rand(32, 1).astype(np.float32)}
    history = model.fit(data, data["a"] + data["b"] ** 2, epochs=2, batch_size=8, verbose=2)
    tf.io.gfile.makedirs(args.job_dir)  # a gs:// --job-dir arrives as given, as on the service
    with tf.io.gfile.GFile(os.path.join(args.job_dir, "result.json"), "w") as out:
        json.dump({"keras": tf.keras.__version__, "tensorflow": tf.__version__,
                   "loss": history.history["loss"][-1], "lambda_width": int(squared.shape[-1])}, out)


if __name__ == "__main__":
    main()
