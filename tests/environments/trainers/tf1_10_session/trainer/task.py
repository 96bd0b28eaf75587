"""A graph-and-session trainer of the runtime 1.10 era (no tf.compat, no eager): placeholders,
tf.Session, tf.logging and tf.gfile, run without --python-version (the service's 2.7)."""

import argparse
import os
import sys

import tensorflow as tf


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    args = parser.parse_args()
    tf.logging.set_verbosity(tf.logging.INFO)
    values = tf.placeholder(tf.float32, shape=[None], name="values")
    total = tf.reduce_sum(values)
    with tf.Session() as session:
        value = session.run(total, feed_dict={values: [20.0, 22.0]})
    tf.logging.info("sum is %g", value)
    tf.gfile.MakeDirs(args.job_dir)
    with tf.gfile.GFile(os.path.join(args.job_dir, "sum.txt"), "w") as out:
        out.write("%g %s %d.%d\n" % (value, tf.__version__, sys.version_info[0], sys.version_info[1]))


if __name__ == "__main__":
    main()
