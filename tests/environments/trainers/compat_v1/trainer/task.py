"""TF 1 graph-mode code through tf.compat.v1, as a trainer for runtime 1.x was written."""

import argparse
import os

import tensorflow as tf


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    tf.compat.v1.disable_eager_execution()
    total = tf.compat.v1.reduce_sum(tf.compat.v1.placeholder(tf.float32, shape=[None], name="values"))
    with tf.compat.v1.Session() as session:
        value = session.run(total, feed_dict={"values:0": [20.0, 22.0]})
    tf.io.gfile.makedirs(args.job_dir)  # a gs:// --job-dir arrives as given, as on the service
    with tf.io.gfile.GFile(os.path.join(args.job_dir, "sum.txt"), "w") as out:
        out.write(f"{value:g} {tf.__version__}\n")


if __name__ == "__main__":
    main()
