"""MultiWorkerMirroredStrategy with a tiny custom loop (Keras 3's fit cannot drive it).

The chief writes JOB_DIR/mwms.json with the replicas in sync and the losses it saw.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfcfg._common import is_primary, job_dir, write_json

STEPS = 5


def main() -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        weights = tf.Variable(tf.zeros([4, 1]), name="weights")
    features = tf.constant(np.ones((8, 4), dtype=np.float32))
    labels = tf.constant(np.full((8, 1), 2.0, dtype=np.float32))

    @tf.function
    def train_step() -> tf.Tensor:
        def replica_step() -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(features, weights) - labels))
            gradient = tape.gradient(loss, weights)
            context = tf.distribute.get_replica_context()
            total = context.all_reduce(tf.distribute.ReduceOp.MEAN, gradient)
            weights.assign_sub(0.05 * total)
            return loss

        losses = strategy.run(replica_step)
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    history = [float(train_step()) for _ in range(STEPS)]
    print(f"losses {history}")
    if is_primary():
        write_json(job_dir() / "mwms.json", {
            "replicas_in_sync": int(strategy.num_replicas_in_sync),
            "losses": history,
        })


if __name__ == "__main__":
    main()
