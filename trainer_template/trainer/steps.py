"""One training step on one replica's batch, shared by the synchronous and parameter-server loops."""

from __future__ import annotations

import tensorflow as tf

from trainer.evaluation import batch_sums, per_example_loss
from trainer.training_state import TrainingState


def train_on_batch(state: TrainingState, features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Apply one optimizer step (call it inside `strategy.run`); returns [loss sum, correct, examples]."""
    model, optimizer = state.model, state.optimizer
    with tf.GradientTape() as tape:
        logits = model(features, training=True)
        losses = per_example_loss(labels, logits)
        # Averages over the global batch, so summing gradients across replicas is correct.
        loss = tf.nn.compute_average_loss(losses)
        if model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    state.global_step.assign_add(1)
    return batch_sums(labels, logits, losses)
