"""The ``evaluator`` task: evaluates each new checkpoint the chief writes, until the last one.

It knows a checkpoint is the last when its step reached ``TrainSpec.max_steps``, or when the
chief's completion marker names the step it just evaluated (training can end early). It gives
up after ``EvalSpec.evaluator_idle_timeout_secs`` without a new checkpoint.
"""

from __future__ import annotations

import logging
import time

import tensorflow as tf

from trainer.checkpoints import checkpoint_step, read_completion_marker
from trainer.compat import keras
from trainer.estimator import Estimator, EvalSpec, TrainSpec
from trainer.evaluation import EvalRunner
from trainer.reporting import Summaries, format_metrics

logger = logging.getLogger("trainer")

# How often the evaluator wakes up, while no checkpoint arrives, to check the marker and timeout.
_POLL_SECS = 2.0


class _FinishWatch:
    """The ``timeout_fn`` of ``tf.train.checkpoints_iterator``: True once waiting is pointless."""

    def __init__(self, checkpoint_dir: str, marker_path: str, idle_timeout_secs: float) -> None:
        self._checkpoint_dir = checkpoint_dir
        self._marker_path = marker_path
        self._idle_timeout_secs = idle_timeout_secs
        self.last_evaluated: str | None = None
        self.last_activity = time.monotonic()
        self.reason = ""

    def __call__(self) -> bool:
        final_step = read_completion_marker(self._marker_path)
        latest = tf.train.latest_checkpoint(self._checkpoint_dir)
        finished = final_step is not None and latest is not None and checkpoint_step(latest) >= final_step
        if finished and latest == self.last_evaluated:
            self.reason = f"training finished at step {final_step}"
            return True
        if time.monotonic() - self.last_activity > self._idle_timeout_secs:
            self.reason = f"no new checkpoint for {self._idle_timeout_secs:.0f}s"
            return True
        return False


def run_evaluator(estimator: Estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> int:
    config = estimator.config
    keras.utils.set_random_seed(config.tf_random_seed)
    runner = EvalRunner(estimator.model.build_model(), eval_spec)
    global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    # Only what evaluation needs; optimizer slots in the checkpoint are skipped.
    checkpoint = tf.train.Checkpoint(model=runner.model, step=global_step)
    summaries = Summaries(config.evaluator_log_dir)
    watch = _FinishWatch(config.checkpoint_dir, config.completion_marker, eval_spec.evaluator_idle_timeout_secs)

    if eval_spec.start_delay_secs > 0:
        logger.info("waiting %.0fs before the first evaluation", eval_spec.start_delay_secs)
        time.sleep(eval_spec.start_delay_secs)
    logger.info("evaluating checkpoints from %s as they appear", config.checkpoint_dir)

    for path in tf.train.checkpoints_iterator(
        config.checkpoint_dir,
        min_interval_secs=eval_spec.throttle_secs,
        timeout=_POLL_SECS,
        timeout_fn=watch,
    ):
        watch.last_activity = time.monotonic()
        try:
            checkpoint.restore(path).expect_partial()
        except (tf.errors.NotFoundError, tf.errors.DataLossError) as error:
            # The chief's keep_checkpoint_max may delete a checkpoint while we read it.
            logger.warning("skipping checkpoint %s: %s", path, error)
            continue
        step = int(global_step.numpy())
        metrics = runner.evaluate()
        watch.last_evaluated = path
        logger.info("evaluator: checkpoint %s step %d: %s", path, step, format_metrics(metrics))
        summaries.scalars({"loss": metrics["loss"], "accuracy": metrics["accuracy"]}, step)
        if step >= train_spec.max_steps:
            logger.info("evaluated the final checkpoint (step %d); evaluator done", step)
            return 0
    logger.info("evaluator stopping: %s", watch.reason)
    return 0
