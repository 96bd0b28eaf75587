"""ParameterServerStrategy: workers and parameter servers serve, the chief coordinates.

The chief schedules a few steps, then writes JOB_DIR/ps.json with the final variable value.
Servers never exit on their own; the runner stops them when the chief is done.
"""

from __future__ import annotations

import tensorflow as tf

from tfcfg._common import job_dir, tf_config, write_json

STEPS = 6


def serve(kind: str, index: int) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=kind, task_index=index, protocol="grpc", start=True
    )
    print(f"{kind} {index} serving", flush=True)
    server.join()


def coordinate() -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        counter = tf.Variable(0.0, name="counter")

    @tf.function
    def step() -> tf.Tensor:
        def replica_step() -> tf.Tensor:
            counter.assign_add(1.0)
            return counter.read_value()

        return strategy.run(replica_step)

    for _ in range(STEPS):
        coordinator.schedule(step)
    coordinator.join()
    value = float(counter.numpy())
    print(f"counter {value}")
    write_json(job_dir() / "ps.json", {
        "counter": value,
        "workers": len(resolver.cluster_spec().as_dict().get("worker", [])),
        "ps": len(resolver.cluster_spec().as_dict().get("ps", [])),
    })


def main() -> None:
    task = tf_config()["task"]
    if task["type"] in ("worker", "ps"):
        serve(task["type"], int(task["index"]))
    else:
        coordinate()


if __name__ == "__main__":
    main()
