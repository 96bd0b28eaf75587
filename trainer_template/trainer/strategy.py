"""The tf.distribute strategy for this replica, chosen from its cluster role (TF_CONFIG)."""

from __future__ import annotations

import logging
from typing import NoReturn

import tensorflow as tf

from trainer.cluster import MULTI_WORKER, PARAMETER_SERVER, SINGLE, ClusterRole

logger = logging.getLogger("trainer")


def _resolver() -> tf.distribute.cluster_resolver.ClusterResolver:
    # Reads the TF_CONFIG that cluster.expose_to_tensorflow rewrote for TensorFlow.
    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


def create_strategy(role: ClusterRole) -> tf.distribute.Strategy:
    if role.mode == SINGLE:
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            logger.info("single replica over %d local GPU(s): MirroredStrategy", len(gpus))
            return tf.distribute.MirroredStrategy()
        logger.info("single replica without GPUs: default strategy")
        return tf.distribute.get_strategy()
    if role.mode == MULTI_WORKER:
        logger.info("%d synchronous workers: MultiWorkerMirroredStrategy", role.num_workers)
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=_resolver())
    if role.mode == PARAMETER_SERVER:
        logger.info(
            "%d workers, %d parameter servers: ParameterServerStrategy",
            role.num_workers,
            len(role.cluster.get("ps", [])),
        )
        return tf.distribute.ParameterServerStrategy(cluster_resolver=_resolver())
    raise ValueError(f"no training strategy for mode {role.mode!r}")


def serve_forever(role: ClusterRole) -> NoReturn:
    """Run this worker or parameter server for the coordinator; ends only when the process is killed."""
    resolver = _resolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    logger.info("%s serving for the coordinator at %s", role.label, server.target)
    server.join()
    raise SystemExit(0)
