"""The model: a small Keras classifier over the 64 pixel values of an 8x8 digit, and its serving form."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from trainer.compat import keras
from trainer.inputs import NUM_CLASSES, NUM_FEATURES

# Pixel values in the digits data run from 0 to 16; the model scales them itself so that
# serving clients send the same raw values the CSV files hold.
PIXEL_MAX = 16.0


def build_classifier(hidden_units: Sequence[int], num_features: int = NUM_FEATURES) -> keras.Model:
    """Logits for each class. Called inside the strategy scope so variables land where they should."""
    layers: list[keras.layers.Layer] = [keras.Input(shape=(num_features,), name="features")]
    layers.append(keras.layers.Rescaling(1.0 / PIXEL_MAX))
    layers.extend(keras.layers.Dense(units, activation="relu") for units in hidden_units)
    layers.append(keras.layers.Dense(NUM_CLASSES, name="logits"))
    return keras.Sequential(layers, name="digits_classifier")


def build_optimizer(learning_rate: float) -> keras.optimizers.Optimizer:
    return keras.optimizers.Adam(learning_rate=learning_rate)


class ServingModule(tf.Module):
    """What the export holds: the model behind a signature that takes raw 64-float feature rows."""

    def __init__(self, model: keras.Model, num_features: int = NUM_FEATURES) -> None:
        super().__init__(name="serving")
        self.model = model
        self.serve = tf.function(
            self._predict,
            input_signature=[tf.TensorSpec([None, num_features], tf.float32, name="features")],
        )

    def _predict(self, features: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = self.model(features, training=False)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits),
            "classes": tf.argmax(logits, axis=-1),
        }
