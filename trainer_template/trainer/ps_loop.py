"""Parameter server training, run by the chief as coordinator.

Variables live on the parameter servers; the coordinator schedules single steps on whichever
worker is free, in chunks that end at the next log line or checkpoint. Only the coordinator
saves checkpoints (it can read every variable); workers hold nothing worth saving.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import tensorflow as tf

from trainer.checkpoints import CheckpointWriter
from trainer.compat import current_worker_index, keras
from trainer.estimator import Estimator, EvalSpec, TrainSpec
from trainer.inputs import PipelineContext, derive_seed
from trainer.primary import PrimaryDuties
from trainer.reporting import MetricWindow, Summaries, format_metrics
from trainer.steps import train_on_batch
from trainer.stopping import EXIT_TERMINATED, TerminationRequest
from trainer.strategy import create_strategy
from trainer.training_state import TrainingState, create_training_state, restore_latest

logger = logging.getLogger("trainer")


def _worker_seeds(estimator: Estimator, start_step: int) -> list[int]:
    config = estimator.config
    return [
        derive_seed(config.tf_random_seed, "worker", index, start_step)
        for index in range(config.role.num_workers)
    ]


def _per_worker_iterator(
    strategy: tf.distribute.Strategy,
    coordinator: tf.distribute.coordinator.ClusterCoordinator,
    estimator: Estimator,
    train_spec: TrainSpec,
    start_step: int,
) -> Any:
    num_workers = estimator.config.role.num_workers
    seeds = tf.constant(_worker_seeds(estimator, start_step), dtype=tf.int64)

    def dataset_fn(_: tf.distribute.InputContext) -> tf.data.Dataset:
        # Runs on each worker: only there is the worker index known, as a tensor (the input
        # context traced on the coordinator always says pipeline 0 of 1).
        worker_index = current_worker_index()
        context = PipelineContext(
            num_input_pipelines=num_workers,
            input_pipeline_id=worker_index,
            batch_size=train_spec.batch_size,
            seed=tf.gather(seeds, worker_index),
        )
        return train_spec.input_fn(context)

    @tf.function
    def per_worker_dataset_fn() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    return iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))


def _log_input_plan(estimator: Estimator, train_spec: TrainSpec, start_step: int) -> None:
    file_dataset = getattr(train_spec.input_fn, "file_dataset", None)
    if file_dataset is None:
        return
    num_workers = estimator.config.role.num_workers
    for index, seed in enumerate(_worker_seeds(estimator, start_step)):
        context = PipelineContext(num_workers, index, train_spec.batch_size, seed)
        order = [path.decode() for path in file_dataset(context).as_numpy_iterator()]
        logger.info(
            "worker:%d seed %d reads %d file(s), first epoch order: %s", index, seed, len(order), ", ".join(order)
        )


def _make_worker_step(strategy: tf.distribute.Strategy, state: TrainingState) -> Any:
    def replica_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        return train_on_batch(state, features, labels)

    @tf.function
    def worker_step(iterator: Any) -> tf.Tensor:
        features, labels = next(iterator)
        per_replica = strategy.run(replica_step, args=(features, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return worker_step


def _next_boundary(step: int, max_steps: int, *periods: int | None) -> int:
    """The first step after ``step`` where the coordinator must stop scheduling to log or save."""
    candidates = [max_steps]
    candidates.extend((step // period + 1) * period for period in periods if period)
    return min(candidates)


def run_parameter_server_training(estimator: Estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> int:
    config = estimator.config
    strategy = create_strategy(config.role)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    # Installed last, so a SIGTERM handler TensorFlow sets up for its cluster cannot replace it.
    termination = TerminationRequest().install()
    keras.utils.set_random_seed(config.tf_random_seed)
    state = create_training_state(estimator.model, strategy)
    restored = restore_latest(state, config.checkpoint_dir)
    writer = CheckpointWriter(state.checkpoint, config.checkpoint_dir, keep_max=config.keep_checkpoint_max)
    if restored is not None:
        writer.last_saved_step = state.step
    duties = PrimaryDuties(estimator, eval_spec)
    duties.begin()

    step = start_step = state.step
    max_steps = train_spec.max_steps
    if step < max_steps:
        _log_input_plan(estimator, train_spec, start_step)
        iterator = _per_worker_iterator(strategy, coordinator, estimator, train_spec, start_step)
        worker_step = _make_worker_step(strategy, state)
        summaries = Summaries(config.train_log_dir)
        window = MetricWindow()
        last_save_time = time.monotonic()
        logger.info("training from step %d to step %d", start_step, max_steps)

        while step < max_steps:
            boundary = _next_boundary(
                step, max_steps, config.log_step_count_steps, config.save_summary_steps, config.save_checkpoints_steps
            )
            results = [coordinator.schedule(worker_step, args=(iterator,)) for _ in range(boundary - step)]
            coordinator.join()
            step = state.step
            totals = np.sum([result.fetch() for result in results], axis=0)
            window.add(float(totals[0]), float(totals[1]), float(totals[2]), steps=len(results))

            at_log = step % config.log_step_count_steps == 0 or step >= max_steps
            at_summary = step % config.save_summary_steps == 0
            if at_log or at_summary:
                values = window.flush()
                if at_log:
                    logger.info("step %d/%d %s", step, max_steps, format_metrics(values))
                if at_summary:
                    summaries.scalars(values, step)

            by_steps = bool(config.save_checkpoints_steps) and step % config.save_checkpoints_steps == 0
            by_clock = (
                config.save_checkpoints_secs is not None
                and time.monotonic() - last_save_time >= config.save_checkpoints_secs
            )
            if by_steps or by_clock or termination.requested or step >= max_steps:
                writer.save(step)
                last_save_time = time.monotonic()
                if termination.requested:
                    logger.info("stopped at step %d after SIGTERM; checkpoint saved", step)
                    return EXIT_TERMINATED
                if step < max_steps:
                    duties.after_checkpoint(state.model, step)
    else:
        logger.info("step %d already reached max_steps %d", step, max_steps)

    metrics = duties.finish(state.model, step)
    logger.info("training complete at step %d: %s", step, format_metrics(metrics))
    return 0
