"""Synchronous training: one replica alone, or all replicas in lockstep under MultiWorkerMirroredStrategy.

Every replica runs this loop. Decisions that must be the same everywhere (save now because of
the clock, stop because one replica got SIGTERM) travel inside the per-step all-reduce, so all
replicas save at the same step and none waits forever on a collective the others skipped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import tensorflow as tf

from trainer.checkpoints import CheckpointWriter
from trainer.compat import keras
from trainer.estimator import Estimator, EvalSpec, TrainSpec
from trainer.inputs import PipelineContext, derive_seed, first_batch_fingerprint
from trainer.primary import PrimaryDuties
from trainer.reporting import MetricWindow, Summaries, format_metrics
from trainer.steps import train_on_batch
from trainer.stopping import EXIT_TERMINATED, TerminationRequest
from trainer.strategy import create_strategy
from trainer.training_state import TrainingState, create_training_state, restore_latest

logger = logging.getLogger("trainer")

# Layout of the vector each step all-reduces: the batch sums, then the shared decisions.
_LOSS_SUM, _CORRECT, _EXAMPLES, _STOP, _SAVE = range(5)


def _make_train_step(strategy: tf.distribute.Strategy, state: TrainingState) -> Any:
    def replica_step(features: tf.Tensor, labels: tf.Tensor, decisions: tf.Tensor) -> tf.Tensor:
        return tf.concat([train_on_batch(state, features, labels), decisions], axis=0)

    @tf.function
    def train_step(batch: Any, decisions: tf.Tensor) -> tf.Tensor:
        features, labels = batch
        per_replica = strategy.run(replica_step, args=(features, labels, decisions))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return train_step


def _distributed_input(
    strategy: tf.distribute.Strategy, estimator: Estimator, train_spec: TrainSpec, start_step: int
) -> tuple[Any, list[PipelineContext]]:
    role = estimator.config.role
    seed = derive_seed(estimator.config.tf_random_seed, role.task_type, role.task_index, start_step)
    contexts: list[PipelineContext] = []

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        context = PipelineContext(
            num_input_pipelines=input_context.num_input_pipelines,
            input_pipeline_id=input_context.input_pipeline_id,
            batch_size=train_spec.batch_size,
            seed=seed,
        )
        contexts.append(context)
        return train_spec.input_fn(context)

    return strategy.distribute_datasets_from_function(dataset_fn), contexts


def _log_input_plan(train_spec: TrainSpec, contexts: list[PipelineContext]) -> None:
    file_dataset = getattr(train_spec.input_fn, "file_dataset", None)
    for context in contexts:
        if file_dataset is None:
            continue
        order = [path.decode() for path in file_dataset(context).as_numpy_iterator()]
        logger.info(
            "input pipeline %d/%d seed %d reads %d file(s), first epoch order: %s",
            context.input_pipeline_id,
            context.num_input_pipelines,
            context.seed,
            len(order),
            ", ".join(order),
        )


def _log_first_batch(strategy: tf.distribute.Strategy, batch: Any) -> None:
    features = strategy.experimental_local_results(batch[0])
    fingerprint = first_batch_fingerprint([tensor.numpy() for tensor in features])
    logger.info("first batch fingerprint %s", fingerprint)


def _train(
    strategy: tf.distribute.Strategy,
    state: TrainingState,
    estimator: Estimator,
    train_spec: TrainSpec,
    writer: CheckpointWriter,
    duties: PrimaryDuties | None,
    termination: TerminationRequest,
) -> bool:
    """Runs steps until ``max_steps``; returns True when stopped early by SIGTERM."""
    config = estimator.config
    start_step = step = state.step
    max_steps = train_spec.max_steps
    dataset, contexts = _distributed_input(strategy, estimator, train_spec, start_step)
    _log_input_plan(train_spec, contexts)
    iterator = iter(dataset)
    train_step = _make_train_step(strategy, state)
    summaries = Summaries(config.train_log_dir if duties is not None else None)
    log_window, summary_window = MetricWindow(), MetricWindow()
    last_save_time = time.monotonic()
    logger.info("training from step %d to step %d", start_step, max_steps)

    while step < max_steps:
        batch = next(iterator)
        if step == start_step:
            _log_first_batch(strategy, batch)
        save_by_clock = (
            config.save_checkpoints_secs is not None
            and time.monotonic() - last_save_time >= config.save_checkpoints_secs
        )
        decisions = tf.constant([float(termination.requested), float(save_by_clock)])
        totals = train_step(batch, decisions).numpy()
        step += 1

        for window in (log_window, summary_window):
            window.add(totals[_LOSS_SUM], totals[_CORRECT], totals[_EXAMPLES])
        if step % config.log_step_count_steps == 0 or step == max_steps:
            logger.info("step %d/%d %s", step, max_steps, format_metrics(log_window.flush()))
        if step % config.save_summary_steps == 0:
            summaries.scalars(summary_window.flush(), step)

        stop = totals[_STOP] > 0
        by_steps = bool(config.save_checkpoints_steps) and step % config.save_checkpoints_steps == 0
        if by_steps or totals[_SAVE] > 0 or stop or step == max_steps:
            writer.save(step)
            last_save_time = time.monotonic()
            if stop:
                logger.info("stopped at step %d after SIGTERM; checkpoint saved", step)
                return True
            if duties is not None and step < max_steps:
                duties.after_checkpoint(state.model, step)
    return False


def run_synchronous_training(estimator: Estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> int:
    config = estimator.config
    role = config.role
    strategy = create_strategy(role)
    # After the strategy: MultiWorkerMirroredStrategy's coordination service installs a SIGTERM
    # handler of its own (for TensorFlow's preemption notifier) that would replace this one.
    termination = TerminationRequest().install()
    keras.utils.set_random_seed(config.tf_random_seed)
    state = create_training_state(estimator.model, strategy)
    restored = restore_latest(state, config.checkpoint_dir)

    primary = role.is_primary
    scratch = None if primary else config.scratch_dir(f"checkpoints-{role.task_type}-{role.task_index}")
    writer = CheckpointWriter(
        state.checkpoint, config.checkpoint_dir, keep_max=config.keep_checkpoint_max, scratch_dir=scratch
    )
    if restored is not None:
        writer.last_saved_step = state.step
    duties = PrimaryDuties(estimator, eval_spec) if primary else None
    if duties is not None:
        duties.begin()

    if state.step < train_spec.max_steps:
        if _train(strategy, state, estimator, train_spec, writer, duties, termination):
            return EXIT_TERMINATED
    else:
        logger.info("step %d already reached max_steps %d", state.step, train_spec.max_steps)

    if duties is not None:
        metrics = duties.finish(state.model, state.step)
        logger.info("training complete at step %d: %s", state.step, format_metrics(metrics))
    else:
        logger.info("training complete at step %d", state.step)
    _leave_together(strategy)
    return 0


def _leave_together(strategy: tf.distribute.Strategy) -> None:
    """One last all-reduce, so that the workers wait for the primary's evaluation and export.

    A worker that exits while the primary is still exporting stops sending heartbeats to
    TensorFlow's coordination service on the primary, which then logs "heartbeat timeout" errors
    in a job that succeeded.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return

    def one() -> tf.Tensor:  # not a lambda: TensorFlow 2.11's autograph warns about each one
        return tf.constant(1.0)

    @tf.function  # eagerly, the collective logs a warning about its overhead
    def all_reduce_one() -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(one), axis=None)

    all_reduce_one()
