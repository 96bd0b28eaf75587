"""Replaces ``tf.estimator.train_and_evaluate``: TF_CONFIG picks the loop this process runs.

The loops (``sync_loop``, ``ps_loop``, ``evaluator_task``) import the specs of ``trainer.estimator``;
this module imports the loops, so the specs never import what runs them.
"""

from __future__ import annotations

import logging

from trainer.cluster import EVALUATION, PARAMETER_SERVER, expose_to_tensorflow
from trainer.estimator import Estimator, EvalSpec, TrainSpec

logger = logging.getLogger("trainer")


def train_and_evaluate(estimator: Estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> int:
    """Replaces ``tf.estimator.train_and_evaluate``; returns the process exit code.

    TF_CONFIG decides what this process does: train alone, train as one of the synchronous
    MultiWorkerMirroredStrategy replicas, coordinate ParameterServerStrategy training (chief),
    serve variables or computation for it (ps and workers, which never return), or evaluate
    checkpoints as they appear (evaluator).
    """
    role = estimator.config.role
    expose_to_tensorflow(role)
    logger.info("task %s, training mode %s", role.label, role.mode)

    if role.mode == EVALUATION:
        from trainer.evaluator_task import run_evaluator

        return run_evaluator(estimator, train_spec, eval_spec)
    if role.mode == PARAMETER_SERVER:
        if not role.is_primary:
            from trainer.strategy import serve_forever

            serve_forever(role)
        from trainer.ps_loop import run_parameter_server_training

        return run_parameter_server_training(estimator, train_spec, eval_spec)

    from trainer.sync_loop import run_synchronous_training

    return run_synchronous_training(estimator, train_spec, eval_spec)
