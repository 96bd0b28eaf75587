"""The hand-written Ray equivalent of a 2-replica no-op aiptrain job, for `ray job submit`.

It does what the aiptrain driver does, minus aiptrain: a SPREAD placement group of two bundles
sized like n1-standard-4 at scale 0.25, one actor per bundle, each running the no-op trainer
(`python -m trainer.task`, from the job's working directory) as a subprocess with a TF_CONFIG,
and the job waits for both.
"""

import json
import os
import subprocess
import sys

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

BUNDLE = {"CPU": 1.0, "memory": 3.75e9}


@ray.remote
class Replica:
    def run(self, task_type, cluster):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": task_type, "index": 0}}))
        return subprocess.run([sys.executable, "-m", "trainer.task"], env=env, check=False).returncode


ray.init()
group = placement_group([BUNDLE, BUNDLE], strategy="SPREAD")
ray.get(group.ready())
cluster = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
replicas = [
    Replica.options(num_cpus=BUNDLE["CPU"], memory=BUNDLE["memory"],
                    scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
                    ).remote()
    for index in range(2)
]
tasks = ("chief", "worker")
codes = ray.get([replica.run.remote(task, cluster) for replica, task in zip(replicas, tasks, strict=True)])
print("exit codes", codes, flush=True)
sys.exit(max(codes))
