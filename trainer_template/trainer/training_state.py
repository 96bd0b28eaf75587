"""Everything a checkpoint holds: model, optimizer and the global step, created under a strategy."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import tensorflow as tf

from trainer.compat import keras
from trainer.estimator import ModelSpec

logger = logging.getLogger("trainer")


@dataclass
class TrainingState:
    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    global_step: tf.Variable
    checkpoint: tf.train.Checkpoint

    @property
    def step(self) -> int:
        return int(self.global_step.numpy())


def create_training_state(spec: ModelSpec, strategy: tf.distribute.Strategy) -> TrainingState:
    with strategy.scope():
        model = spec.build_model()
        optimizer = spec.build_optimizer()
        # Building the optimizer now creates its slot variables before a restore, so a restored
        # checkpoint fills them directly instead of through deferred restoration.
        optimizer.build(model.trainable_variables)
        global_step = tf.Variable(
            0,
            dtype=tf.int64,
            trainable=False,
            name="global_step",
            # Every replica runs the same step; count it once.
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=global_step)
    return TrainingState(model, optimizer, global_step, checkpoint)


def restore_latest(state: TrainingState, checkpoint_dir: str) -> str | None:
    """Restore the newest checkpoint in ``checkpoint_dir``, if any; returns its path."""
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest is None:
        logger.info("no checkpoint in %s: starting from step 0", checkpoint_dir)
        return None
    state.checkpoint.restore(latest).assert_existing_objects_matched()
    logger.info("restored checkpoint %s at step %d", latest, state.step)
    return latest
