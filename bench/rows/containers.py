"""Row 16: container jobs on the local backend, against the same containers started by hand.

Both sides run on a Docker daemon of the group's own (started hermetic, as the test suite's:
tests/fixtures/containers.py) and the suite's TensorFlow image (this machine's Python and
TensorFlow, ENTRYPOINT `python3 /opt/trainer/task.py`, tests/fixtures/container_trainer.py).

16a: a BASIC job of the image training a small Keras model (`--mode train`), `jobs submit training
--master-image-uri` + `jobs wait`, against `docker run --rm --init` of the same image and args.
16b: a CUSTOM cluster of 4 containers (master as chief, 2 workers, a parameter server;
ParameterServerStrategy), against the same 4 containers started by hand: a network, `docker run
-d` of each with its TF_CONFIG and its hostname, `docker wait` of the chief, then the others and the
network removed (as the job removes them before it ends). Goal of both: at most 1.3x.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time

from bench.context import BenchContext
from bench.environment import BenchError, aiptrain_command, isolated_env, run_checked
from bench.harness import RowResult, alternate, paired_row, ratio_max

RUNS = 5
CLUSTER_RUNS = 3
TRAIN_ARGS = ["--mode", "train", "--steps", "20"]
CLUSTER_ARGS = ["--mode", "ps", "--steps", "30"]
CLUSTER_FLAGS = ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4", "--worker-machine-type",
                 "n1-standard-4", "--worker-count", "2", "--parameter-server-machine-type", "n1-standard-4",
                 "--parameter-server-count", "1", "--use-chief-in-tf-config", "true"]
# Secondary replicas first, the chief last, as the engine starts them.
REPLICAS = [("ps", 0, "ps-replica-0"), ("worker", 0, "worker-replica-0"), ("worker", 1, "worker-replica-1"),
            ("chief", 0, "master-replica-0")]
_numbers = itertools.count()


def _docker(host: str, *args: str, timeout: float = 600) -> str:
    done = subprocess.run(["docker", *args], env={"PATH": "/usr/local/bin:/usr/bin:/bin", "DOCKER_HOST": host},
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise BenchError(f"docker {' '.join(args[:2])} exited {done.returncode}: {done.stderr[-500:]}")
    return done.stdout.strip()


def _submit_and_wait(env: dict[str, str], job_id: str, image: str, flags: list[str], args: list[str]) -> float:
    started = time.perf_counter()
    run_checked([*aiptrain_command(), "jobs", "submit", "training", job_id, "--region", "us-central1",
                 "--master-image-uri", image, *flags, "--", *args], env=env, timeout=600)
    run_checked([*aiptrain_command(), "jobs", "wait", job_id], env=env, timeout=900)
    return time.perf_counter() - started


def _by_hand_basic(host: str, image: str) -> float:
    started = time.perf_counter()
    _docker(host, "run", "--rm", "--pull", "never", "--init", image, *TRAIN_ARGS)
    return time.perf_counter() - started


def _by_hand_cluster(host: str, image: str) -> float:
    name = f"bench-by-hand-{next(_numbers)}"
    cluster = {"chief": ["master-replica-0:2222"], "worker": ["worker-replica-0:2222", "worker-replica-1:2222"],
               "ps": ["ps-replica-0:2222"]}
    started = time.perf_counter()
    _docker(host, "network", "create", name)
    try:
        for task_type, index, hostname in REPLICAS:
            tf_config = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index},
                                    "environment": "cloud"})
            _docker(host, "run", "--detach", "--pull", "never", "--init", "--name", f"{name}-{hostname}",
                    "--hostname", hostname, "--network", name, "--network-alias", hostname,
                    "--env", f"TF_CONFIG={tf_config}", "--env", "PYTHONUNBUFFERED=1", image, *CLUSTER_ARGS)
        code = _docker(host, "wait", f"{name}-master-replica-0")
    finally:
        containers = [f"{name}-{hostname}" for _, _, hostname in REPLICAS]
        subprocess.run(["docker", "rm", "--force", *containers], env={"PATH": "/usr/local/bin:/usr/bin:/bin",
                       "DOCKER_HOST": host}, capture_output=True, check=False)
        _docker(host, "network", "rm", name)
    elapsed = time.perf_counter() - started
    if code != "0":
        raise BenchError(f"the hand-started chief exited {code}")
    return elapsed


def run(ctx: BenchContext) -> list[RowResult]:
    from tests.fixtures.containers import start_suite_docker, stop_suite_docker, tensorflow_image

    try:
        suite = start_suite_docker()
    except BaseException as error:  # pytest's skip outside a test: no daemon can start here
        raise BenchError(f"no Docker daemon could be started: {error}") from None
    try:
        image = tensorflow_image(suite)
        env = isolated_env(ctx.cleanup.new_home("containers"),
                           {"DOCKER_HOST": suite.host, "AIPTRAIN_CONTAINER_ENGINE": "docker"})
        numbers = itertools.count()
        basic = alternate(lambda: _submit_and_wait(env, f"container_basic_{next(numbers)}", image, [], TRAIN_ARGS),
                          lambda: _by_hand_basic(suite.host, image), ctx.runs(RUNS))
        cluster = alternate(
            lambda: _submit_and_wait(env, f"container_cluster_{next(numbers)}", image, CLUSTER_FLAGS, CLUSTER_ARGS),
            lambda: _by_hand_cluster(suite.host, image), ctx.runs(CLUSTER_RUNS))
    finally:
        stop_suite_docker(suite)
    shown_image = "$IMAGE"
    submit = [*aiptrain_command(), "jobs", "submit", "training", "container_basic_N", "--region", "us-central1",
              "--master-image-uri", shown_image, "--", *TRAIN_ARGS]
    return [
        paired_row(RowResult(
            row_id="16a", group="containers", unit="s", goal=ratio_max(1.3),
            title="BASIC container job (TensorFlow image, small Keras fit), submit to SUCCEEDED",
            commands=[ctx.show(submit, home=True), ctx.show([*aiptrain_command(), "jobs", "wait", "container_basic_N"],
                                                            home=True)],
            anchor_commands=[ctx.show(["docker", "run", "--rm", "--pull", "never", "--init", shown_image,
                                       *TRAIN_ARGS])],
            anchor_label="`docker run` of the same image by hand",
            notes="Both on the group's own hermetic dockerd; $IMAGE is the suite's TensorFlow image. The subject "
                  "includes CLI start twice, the supervisor, the job's storage endpoint, the network, the "
                  "replica's network owner (its relay) and removing everything before SUCCEEDED.",
        ), basic),
        paired_row(RowResult(
            row_id="16b", group="containers", unit="s", goal=ratio_max(1.3),
            title="4-container CUSTOM cluster (chief, 2 workers, ps; ParameterServerStrategy), submit to SUCCEEDED",
            commands=[ctx.show([*aiptrain_command(), "jobs", "submit", "training", "container_cluster_N",
                                "--region", "us-central1", "--master-image-uri", shown_image, *CLUSTER_FLAGS, "--",
                                *CLUSTER_ARGS], home=True)],
            anchor_commands=["docker network create NET; docker run -d --init --name NET-T --hostname T --network "
                             "NET --network-alias T -e TF_CONFIG=... $IMAGE " + " ".join(CLUSTER_ARGS)
                             + "  # x4 (ps, workers, chief); docker wait NET-master-replica-0; docker rm -f the "
                             "others; docker network rm NET"],
            anchor_label="the same 4 containers started by hand on a network of their own",
        ), cluster),
    ]
