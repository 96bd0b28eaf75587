"""Evaluation of a model on the eval input: loss and accuracy over ``EvalSpec.steps`` batches."""

from __future__ import annotations

import tensorflow as tf

from trainer.compat import keras
from trainer.estimator import EvalSpec


def per_example_loss(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def batch_sums(labels: tf.Tensor, logits: tf.Tensor, losses: tf.Tensor) -> tf.Tensor:
    """[loss sum, correct predictions, examples] of one batch: sums add up across replicas and steps."""
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=-1), labels), tf.float32))
    examples = tf.cast(tf.size(labels), tf.float32)
    return tf.stack([tf.reduce_sum(losses), correct, examples])


class EvalRunner:
    """Evaluates a plain (non-distributed) copy of the model.

    Copying the weights into a local model keeps evaluation off the training cluster: no
    collective ops for the other workers to wait on, no remote reads per batch from parameter
    servers. The same copy is what gets exported.
    """

    def __init__(self, model: keras.Model, eval_spec: EvalSpec) -> None:
        self.model = model
        self._spec = eval_spec
        self._sums = tf.function(self._batch_sums)

    def _batch_sums(self, features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        logits = self.model(features, training=False)
        return batch_sums(labels, logits, per_example_loss(labels, logits))

    def copy_weights_from(self, source: keras.Model) -> None:
        self.model.set_weights(source.get_weights())

    def evaluate(self) -> dict[str, float]:
        dataset = self._spec.input_fn()
        if self._spec.steps is not None:
            dataset = dataset.take(self._spec.steps)
        totals = tf.zeros([3])
        for features, labels in dataset:
            totals += self._sums(features, labels)
        loss_sum, correct, examples = (float(value) for value in totals.numpy())
        if examples == 0:
            raise ValueError("the eval input produced no examples")
        return {"loss": loss_sum / examples, "accuracy": correct / examples, "examples": examples}
