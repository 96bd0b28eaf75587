"""Writing checkpoints the way each strategy needs, and the marker that says training is over."""

from __future__ import annotations

import json
import logging

import tensorflow as tf

logger = logging.getLogger("trainer")


class CheckpointWriter:
    """Saves the training state every time the loop asks.

    The primary replica keeps the real checkpoints. Under MultiWorkerMirroredStrategy every
    worker has to take part in each save (saving may run collective ops), so the others write to
    a private scratch directory that is deleted right after.
    """

    def __init__(
        self,
        checkpoint: tf.train.Checkpoint,
        directory: str,
        *,
        keep_max: int,
        scratch_dir: str | None = None,
    ) -> None:
        self._scratch_dir = scratch_dir
        target = scratch_dir or directory
        self._manager = tf.train.CheckpointManager(checkpoint, target, max_to_keep=None if scratch_dir else keep_max)
        self.last_saved_step: int | None = None

    def save(self, step: int) -> str | None:
        if step == self.last_saved_step:
            return None
        path = self._manager.save(checkpoint_number=step)
        self.last_saved_step = step
        if self._scratch_dir is not None:
            tf.io.gfile.rmtree(self._scratch_dir)
            return None
        logger.info("saved checkpoint %s", path)
        return path


def write_completion_marker(path: str, final_step: int) -> None:
    """Tells evaluators that no checkpoint will follow the one at ``final_step``."""
    with tf.io.gfile.GFile(path, "w") as marker:
        marker.write(json.dumps({"final_step": final_step}))


def read_completion_marker(path: str) -> int | None:
    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as marker:
            return int(json.loads(marker.read())["final_step"])
    except (ValueError, KeyError, TypeError):
        return None


def clear_completion_marker(path: str) -> None:
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def checkpoint_step(path: str) -> int:
    """The global step a ``ckpt-N`` checkpoint was saved at (its number)."""
    return int(path.rsplit("-", 1)[-1])
