"""Estimator-style training on tf.distribute: ``RunConfig``, ``ModelSpec``, ``TrainSpec``, ``EvalSpec``.

``tf.estimator`` is gone from TensorFlow 2.16 on, and Keras 3's ``fit`` cannot drive
MultiWorkerMirroredStrategy or ParameterServerStrategy. These classes keep the Estimator's
vocabulary (and its flags' meaning) over a custom training loop; the docstrings name the
Estimator argument each field replaces. The strategy is chosen from TF_CONFIG, never by a flag,
exactly as ``tf.estimator.RunConfig`` did. ``trainer.train_and_evaluate`` runs them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainer.cluster import ClusterRole, role_from_environment

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from trainer.export import Exporter
    from trainer.inputs import InputFn

COMPLETION_MARKER = "TRAINING_COMPLETE"


@dataclass(frozen=True)
class RunConfig:
    """Replaces ``tf.estimator.RunConfig``.

    - ``model_dir``: ``RunConfig.model_dir`` (checkpoints, summaries and exports live under it).
    - ``save_checkpoints_steps`` / ``save_checkpoints_secs``: the same-named RunConfig arguments;
      either or both may be set. A final checkpoint is always written.
    - ``log_step_count_steps``: ``RunConfig.log_step_count_steps`` (progress log lines).
    - ``save_summary_steps``: ``RunConfig.save_summary_steps`` (TensorBoard train scalars).
    - ``keep_checkpoint_max``: ``RunConfig.keep_checkpoint_max``.
    - ``tf_random_seed``: ``RunConfig.tf_random_seed``; also the job-wide input shuffling seed.
    - ``role``: what RunConfig derived from TF_CONFIG (``task_type``, ``task_id``,
      ``cluster_spec``, ``is_chief``), with the service's ``master`` read as ``chief``.
    """

    model_dir: str
    save_checkpoints_steps: int | None = 100
    save_checkpoints_secs: float | None = None
    log_step_count_steps: int = 50
    save_summary_steps: int = 50
    keep_checkpoint_max: int = 5
    tf_random_seed: int = 42
    role: ClusterRole = field(default_factory=role_from_environment)

    @property
    def checkpoint_dir(self) -> str:
        return os.path.join(self.model_dir, "checkpoints")

    @property
    def completion_marker(self) -> str:
        return os.path.join(self.checkpoint_dir, COMPLETION_MARKER)

    @property
    def train_log_dir(self) -> str:
        return os.path.join(self.model_dir, "logs", "train")

    @property
    def eval_log_dir(self) -> str:
        return os.path.join(self.model_dir, "logs", "eval")

    @property
    def evaluator_log_dir(self) -> str:
        return os.path.join(self.model_dir, "logs", "evaluator")

    @property
    def export_dir_base(self) -> str:
        return os.path.join(self.model_dir, "export")

    def scratch_dir(self, name: str) -> str:
        """A directory of this replica's own, deleted as soon as it has served its purpose."""
        return os.path.join(self.model_dir, f"scratch-{name}")


@dataclass(frozen=True)
class ModelSpec:
    """Replaces ``Estimator(model_fn=...)``: how to build the network and its optimizer.

    Both builders are called inside the distribution strategy's scope, so variables land on the
    right devices (mirrored, or on parameter servers). ``num_features`` sizes the serving signature
    (the Estimator's ``serving_input_receiver_fn``). The loss is sparse softmax cross-entropy on
    the model's logits, the metric is accuracy, as in ``tf.estimator.DNNClassifier``.
    """

    build_model: Callable[[], keras.Model]
    build_optimizer: Callable[[], keras.optimizers.Optimizer]
    num_features: int


@dataclass(frozen=True)
class Estimator:
    """Replaces ``tf.estimator.Estimator(model_fn, config=RunConfig)``."""

    model: ModelSpec
    config: RunConfig


@dataclass(frozen=True)
class TrainSpec:
    """Replaces ``tf.estimator.TrainSpec``.

    - ``input_fn``: ``TrainSpec.input_fn``; called with a ``PipelineContext`` (the Estimator's
      ``input_context``) and returns an endless dataset of ``(features, labels)`` batches of the
      per-replica batch size.
    - ``max_steps``: ``TrainSpec.max_steps``; counted in global steps, restored from checkpoints.
    - ``batch_size``: examples per replica per step, as the batch an Estimator ``input_fn`` built
      on each worker. Under MultiWorkerMirroredStrategy one step consumes ``batch_size`` times
      the number of replicas; with parameter servers each step runs on one worker.
    """

    input_fn: InputFn
    max_steps: int
    batch_size: int


@dataclass(frozen=True)
class EvalSpec:
    """Replaces ``tf.estimator.EvalSpec``.

    - ``input_fn``: ``EvalSpec.input_fn``; no arguments, returns a finite dataset of batches.
    - ``steps``: ``EvalSpec.steps``; ``None`` evaluates the whole eval dataset.
    - ``throttle_secs``: ``EvalSpec.throttle_secs``; no two evaluations closer than this.
    - ``start_delay_secs``: ``EvalSpec.start_delay_secs``; the evaluator task waits this long first.
    - ``exporters``: ``EvalSpec.exporters``; the default ``FinalExporter`` writes the SavedModel.
    - ``metric_tag``: the metric reported for hyperparameter tuning (``hyperparameterMetricTag``).
    - ``evaluator_idle_timeout_secs``: the evaluator gives up after this long without a new
      checkpoint, so it never waits forever for a chief that died.
    """

    input_fn: Callable[[], tf.data.Dataset]
    steps: int | None = None
    throttle_secs: float = 30.0
    start_delay_secs: float = 0.0
    exporters: Sequence[Exporter] | None = None
    metric_tag: str = "accuracy"
    evaluator_idle_timeout_secs: float = 1800.0
