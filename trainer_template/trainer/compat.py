"""The TensorFlow APIs that differ between the versions the trainer runs on.

Runtime 2.11 runs TensorFlow 2.11.0 with Keras 2.11 on Python 3.7, as the service did; newer
installations run TensorFlow 2.16 or later with Keras 3. Each difference is bridged here, and
the path is chosen by looking for the feature, never by comparing version strings.
"""

from __future__ import annotations

import tensorflow as tf

# The public Keras API of the TensorFlow in use, for every module of the trainer. In Keras 2.11 the
# top-level ``keras`` package is the implementation behind that API: its ``keras.optimizers`` are
# the legacy optimizers (no ``Optimizer.build``, which training_state relies on). ``tf.keras`` is
# the public API on every version; from TensorFlow 2.16 on it is the installed Keras 3 itself.
keras = tf.keras


def current_worker_index() -> tf.Tensor:
    """The index of the worker running this, in a dataset function of ``create_per_worker_dataset``.

    The coordinator traces the function once; the value is filled in each time a worker runs it.
    """
    public = getattr(tf.distribute.coordinator, "experimental_get_current_worker_index", None)
    if public is not None:
        return public()
    return _worker_index_at_call_time()


def _worker_index_at_call_time() -> tf.Tensor:
    # TensorFlow 2.11 has no public call for this (2.12 added it). This is what that call does,
    # with internals 2.11 already has: a placeholder that the coordinator fills, every time it
    # runs the function on a worker, from the dispatch context naming that worker. Only 2.11 takes
    # this path (the trainer needs 2.11 or later), so these private modules cannot change under it.
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.distribute.coordinator import coordinator_context
    from tensorflow.python.framework import ops

    def worker_index() -> int:
        context = coordinator_context.get_current_dispatch_context()
        if context is None:
            raise RuntimeError("the worker index is only known in a function the coordinator runs on a worker")
        return int(context.worker_index)

    placeholder = ops.get_default_graph().capture_call_time_value(worker_index, tf.TensorSpec([], tf.int64))
    # Tracing names every input of the function after this attribute, and fails without it.
    placeholder.op._set_attr("_user_specified_name", attr_value_pb2.AttrValue(s=b"worker_index"))
    return placeholder
