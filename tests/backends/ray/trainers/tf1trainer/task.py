"""A TensorFlow 1.x trainer as runtime 1.15 jobs were written: between-graph replication.

Each replica reads TF_CONFIG (the service's `master`, `worker` and `ps` tasks), starts a
`tf.train.Server`; the parameter server serves until it is stopped, the master and the workers
train one linear model whose variables live on it, with `tf.train.replica_device_setter` and a
`MonitoredTrainingSession` (the master initialises and checkpoints into --job-dir). It prints the
TensorFlow and Python it runs on, and the global step and loss it reached. Python 3.7 syntax.
"""

import argparse
import json
import os
import sys

import tensorflow as tf


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--train-steps", type=int, default=200)
    args = parser.parse_args()
    tf.logging.set_verbosity(tf.logging.ERROR)  # the deprecation notes of TF 2 to come
    tf_config = json.loads(os.environ["TF_CONFIG"])
    task = tf_config["task"]
    kind, index = task["type"], int(task["index"])
    name = f"[{kind}:{index}]"
    print(f"{name} TensorFlow {tf.__version__} on Python {sys.version_info[0]}.{sys.version_info[1]}", flush=True)
    cluster = tf.train.ClusterSpec(tf_config["cluster"])
    server = tf.train.Server(cluster, job_name=kind, task_index=index)
    if kind == "ps":
        server.join()
        return 0
    device = f"/job:{kind}/task:{index}"
    with tf.device(tf.train.replica_device_setter(worker_device=device, cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        features = tf.random.normal([64, 4])
        labels = tf.matmul(features, tf.constant([[1.0], [-2.0], [3.0], [0.5]]))
        weights = tf.Variable(tf.zeros([4, 1]), name="weights")
        loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    # Each replica talks to the parameter server and itself only: one that finished early does
    # not stall another's session.
    config = tf.ConfigProto(device_filters=["/job:ps", device])
    is_chief = kind == "master"
    hooks = [tf.train.StopAtStepHook(last_step=args.train_steps)]
    reached, value = 0, float("nan")
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, config=config, hooks=hooks,
                                           checkpoint_dir=args.job_dir if is_chief else None,
                                           save_checkpoint_steps=args.train_steps) as session:
        while not session.should_stop():
            _, reached, value = session.run([train, step, loss])
    print(f"{name} trained to global step {reached}, loss {value:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
