"""The hand-written Ray equivalent of a no-op aiptrain job, for `ray job submit`.

It does what the aiptrain driver does, minus aiptrain: a SPREAD placement group of one bundle
per replica (n1-standard-4 at `--scale`), one actor per bundle, each running the no-op trainer
(`python -m trainer.task`, from the job's working directory) as a subprocess with a TF_CONFIG;
the job waits for all of them, then releases the actors and the bundles. By default the trainer
runs with the node's Python; with `--env-key KEY`, with the runtime environment aiptrain keeps on
each node under that key ($AIPTRAIN_RAY_CACHE_DIR/envs/KEY), as aiptrain's replicas do once their
environment is built.
"""

import argparse
import json
import os
import subprocess
import sys

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

parser = argparse.ArgumentParser()
parser.add_argument("--replicas", type=int, default=2)
parser.add_argument("--scale", type=float, default=0.25)
parser.add_argument("--env-key")
args = parser.parse_args()
BUNDLE = {"CPU": 4 * args.scale, "memory": 15e9 * args.scale}
TASKS = ["chief", "worker", "worker", "ps"][: args.replicas] + ["worker"] * max(0, args.replicas - 4)


@ray.remote
class Replica:
    def run(self, task_type, index, cluster, env_key):
        python = sys.executable
        if env_key:
            python = os.path.join(os.environ["AIPTRAIN_RAY_CACHE_DIR"], "envs", env_key, "bin", "python")
        task = {"type": task_type, "index": index}
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": task}))
        env.pop("PYTHONPATH", None)  # Ray's, for its own interpreter
        return subprocess.run([python, "-m", "trainer.task"], env=env, check=False).returncode


ray.init()
group = placement_group([BUNDLE] * len(TASKS), strategy="SPREAD")
ray.get(group.ready())
cluster = {}
for number, task_type in enumerate(TASKS):
    cluster.setdefault(task_type, []).append(f"127.0.0.1:{number + 1}")
indexes = [TASKS[:number].count(task_type) for number, task_type in enumerate(TASKS)]
replicas = [
    Replica.options(num_cpus=BUNDLE["CPU"], memory=BUNDLE["memory"],
                    scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
                    ).remote()
    for index in range(len(TASKS))
]
codes = ray.get([replica.run.remote(task_type, index, cluster, args.env_key)
                 for replica, task_type, index in zip(replicas, TASKS, indexes, strict=True)])
print("exit codes", codes, flush=True)
# Released before the job ends, as aiptrain's driver does: the next job finds the room at once.
for replica in replicas:
    ray.kill(replica)
remove_placement_group(group)
sys.exit(max(codes))
