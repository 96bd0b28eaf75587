"""Replicas in their runtime's own environment, built by aiptrain's builder on each Ray node.

Every job here runs with the default AIPTRAIN_RAY_RUNTIME_PACKAGES (the environment is built on
the nodes, never taken from the cluster's Python): runtime 1.15, whose TensorFlow 1.15.0 needs
Python 3.7 while the cluster runs 3.11. The session's two nodes keep their environments in caches
of their own (tests/backends/ray/cluster.py), so runtime 1.15's is built once per node for the whole
session; the tests that must see a build happen (two jobs at once, a cancel during the build)
give the runtime a package set of their own through a test catalog, which travels with the job.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from aiptrain._backends.ray.node_preparation import node_store
from aiptrain._job.catalog import catalog_path, runtimes_path
from aiptrain._replicas.processes import tokened_processes
from tests.backends.ray.cluster import RayCluster
from tests.backends.ray.harness import JOB_TIMEOUT, actor_nodes, aiptrain, backend, log_text, wait_until

pytestmark = pytest.mark.ray_cluster

TRAINERS = Path(__file__).parent / "trainers"
TASKS = ["master-replica-0", "worker-replica-0", "worker-replica-1", "ps-replica-0"]
STARTED = re.compile(r"\[(\w+):(\d)\] started at (\S+) on Python (\d+\.\d+) \((\S+)\)")


@pytest.fixture
def built_on_nodes(on_cluster: RayCluster, monkeypatch: pytest.MonkeyPatch) -> RayCluster:
    """The cluster with the default way to the runtime's packages: built on each node."""
    monkeypatch.delenv("AIPTRAIN_RAY_RUNTIME_PACKAGES")
    return on_cluster


def runtime_job(job_id: str, trainer: str, *flags: str, scale: str = "0.5",
                user_args: tuple[str, ...] = ()) -> list[str]:
    """Master + 2 workers + 1 parameter server on runtime 1.15 (Python 3.7); at scale 0.5 each
    replica takes half a 4-CPU node, so two land on each node."""
    return ["jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
            "--package-path", str(TRAINERS / trainer), "--module-name", f"{trainer}.task",
            "--runtime-version", "1.15", "--python-version", "3.7", "--scale-tier", "custom",
            "--master-machine-type", "n1-standard-4", "--worker-machine-type", "n1-standard-4", "--worker-count", "2",
            "--parameter-server-machine-type", "n1-standard-4", "--parameter-server-count", "1",
            "--ray-resource-scale", scale, "--job-dir", f"gs://ray-jobs/{job_id}", *flags, "--", *user_args]


def node_builds(cluster: RayCluster) -> list[Counter[str]]:
    """Per node (head, second): how many times each environment key was built there."""
    return [Counter(build["key"] for build in node_store({"AIPTRAIN_RAY_CACHE_DIR": str(cache)}).builds())
            for cache in cluster.cache_dirs]


def test_four_replicas_two_per_node_run_in_the_runtime_environment_built_once_per_node(built_on_nodes):
    job_id = "ray_env_four"
    result = aiptrain(*runtime_job(job_id, "raytrainer", "--stream-logs",
                                   user_args=("--steps", "1", "--step-seconds", "0", "--rendezvous")))
    assert result.returncode == 0, result.stderr[-4000:]
    logs = result.stderr
    started = STARTED.findall(logs)
    assert sorted(f"{kind}:{index}" for kind, index, *_ in started) == ["master:0", "ps:0", "worker:0", "worker:1"]
    for task in TASKS:
        assert f"\t{task}\t" in logs  # every replica's own lines, streamed
    assert len({address for *_, address, _python, _path in started}) == 4  # 4 distinct TF_CONFIG addresses
    # Each ran on the runtime's Python 3.7 (the cluster runs 3.11), from its own node's cache.
    caches = [str(cache) for cache in built_on_nodes.cache_dirs]
    assert {python for *_, python, _path in started} == {"3.7"}
    assert {next(c for c in caches if path.startswith(c)) for *_, path in started} == set(caches)
    nodes = actor_nodes(built_on_nodes, job_id, TASKS)
    assert sorted(Counter(nodes.values()).values()) == [2, 2]
    # One build per node of the environment, whichever job of the session made it.
    key = Path(started[0][4]).parent.parent.name
    assert [builds[key] for builds in node_builds(built_on_nodes)] == [1, 1]
    assert "Runtime version 1.15 with Python 3.7: TensorFlow 1.15.0 on Python 3.7" in logs


def test_a_tensorflow_1_job_of_runtime_1_15_trains_on_python_3_7_while_the_cluster_runs_3_11(built_on_nodes):
    job_id = "ray_env_tf1"
    result = aiptrain(*runtime_job(job_id, "tf1trainer", "--stream-logs", user_args=("--train-steps", "60")))
    assert result.returncode == 0, result.stderr[-4000:]
    logs = result.stderr
    assert sys.version_info[:2] == (3, 11)  # the cluster's nodes run this interpreter
    for task, name in zip(TASKS, ("[master:0]", "[worker:0]", "[worker:1]", "[ps:0]"), strict=True):
        assert f"{task}\t\t{name} TensorFlow 1.15.0 on Python 3.7" in logs
    # Master and workers trained one model on the parameter server: the global step they share
    # reached the end, and the master checkpointed it into the job directory.
    trained = re.search(r"\[master:0\] trained to global step \d+, loss ([\d.]+)", logs)
    assert trained and float(trained.group(1)) < 0.1
    checkpoints = Path(os.environ["AIPTRAIN_HOME"]) / "storage" / "ray-jobs" / job_id
    saved = [int(path.name.split("-")[1].split(".")[0]) for path in checkpoints.glob("model.ckpt-*.index")]
    assert saved and max(saved) >= 60, saved
    assert backend(built_on_nodes).get_job(job_id).state == "SUCCEEDED"


def catalog_with_extra_package(directory: Path, requirement: str) -> Path:
    """A catalog whose runtime 1.15 also installs `requirement`: another environment than the
    real 1.15's (its key hashes the package list), built from the same warm uv cache."""
    directory.mkdir(parents=True)
    shutil.copy(catalog_path(), directory / "scale_tiers.yaml")
    runtimes = yaml.safe_load(runtimes_path(catalog_path()).read_text())
    runtime = runtimes["runtime_versions"]["1.15"]
    named = runtime["packages"]  # a package set's name, or the list itself
    packages = runtimes["package_sets"][named]["packages"] if isinstance(named, str) else named
    runtime["packages"] = [*packages, requirement]
    (directory / "runtimes.yaml").write_text(yaml.safe_dump(runtimes))
    return directory / "scale_tiers.yaml"


@pytest.fixture
def probe_wheel(tmp_path: Path) -> Path:
    """A small pure-Python wheel that only the test catalog's runtime provides."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(wheels), str(TRAINERS / "probe_dist")], check=True, capture_output=True, timeout=300)
    return next(wheels.glob("aiptrain_ray_probe-*.whl"))


def test_two_jobs_submitted_together_build_their_environment_once_per_node(built_on_nodes, probe_wheel, tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("AIPTRAIN_CATALOG", str(catalog_with_extra_package(tmp_path / "catalog", str(probe_wheel))))
    before = node_builds(built_on_nodes)
    # At scale 0.25 the two jobs' 8 replicas fill the two nodes' 8 CPUs together: both run at once.
    jobs = {job_id: subprocess.Popen(
        [sys.executable, "-m", "aiptrain", *runtime_job(job_id, "raytrainer", "--stream-logs", scale="0.25",
                                                        user_args=("--steps", "1", "--step-seconds", "0",
                                                                   "--import-probe", "--rendezvous"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        for job_id in ("ray_env_twin_a", "ray_env_twin_b")}
    logs = {}
    try:
        for job_id, process in jobs.items():
            _, logs[job_id] = process.communicate(timeout=JOB_TIMEOUT)
            assert process.returncode == 0, logs[job_id][-4000:]
    finally:
        for process in jobs.values():
            process.kill()
    for text in logs.values():
        probes = re.findall(r"\] probe says hello from the runtime's packages \(python (\S+)\)", text)
        assert len(probes) == 4
    key = Path(probes[0]).parent.parent.name
    # The builder's own record on each node: that environment was built once there, by one of the jobs.
    after = node_builds(built_on_nodes)
    assert [builds[key] - old[key] for builds, old in zip(after, before, strict=True)] == [1, 1]
    both = "\n".join(logs.values())
    assert both.count("Building runtime 1.15 on node") == 2
    assert len(set(re.findall(r"Building runtime 1.15 on node (\S+ \(\w+\))", both))) == 2


SLOW_BACKEND = '''"""A build backend that never finishes: it says it started, then sleeps (Python 3.7 syntax)."""
import os
import time


def _hold(*_args, **_kwargs):
    with open({marker!r}, "a") as out:
        out.write("%d\\n" % os.getpid())
    time.sleep(600)


def get_requires_for_build_wheel(config_settings=None):
    return []


prepare_metadata_for_build_wheel = build_wheel = _hold
'''


def slow_package(directory: Path, marker: Path) -> Path:
    """A local project whose build (run by uv while it builds the environment) hangs for 10 minutes."""
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "slow_backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "aiptrain-slow-build"\nversion = "1.0"\n')
    (directory / "slow_backend.py").write_text(SLOW_BACKEND.format(marker=str(marker)))
    return directory


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_job_cancelled_while_its_environments_build_ends_cancelled_and_leaves_nothing(built_on_nodes, tmp_path,
                                                                                        monkeypatch):
    marker = tmp_path / "slow-build-started"
    slow = slow_package(tmp_path / "slowbuild", marker)
    monkeypatch.setenv("AIPTRAIN_CATALOG", str(catalog_with_extra_package(tmp_path / "catalog", str(slow))))
    job_id = "ray_env_cancel"
    submitted = aiptrain(*runtime_job(job_id, "raytrainer", user_args=("--steps", "1")))
    assert submitted.returncode == 0, submitted.stderr
    # Both nodes' builds are under way, one of them in the slow package's build (the other's uv
    # waits for it: uv builds one source tree at a time in its cache, which the nodes of this
    # machine share).
    wait_until(lambda: marker.is_file()
               and log_text(built_on_nodes, job_id).count("Building runtime 1.15 on node") == 2,
               "both builds to be under way", 240)
    builders = [int(pid) for pid in marker.read_text().split()]
    assert backend(built_on_nodes).get_job(job_id).state == "PREPARING"

    assert aiptrain("jobs", "cancel", job_id, "--backend", "ray").returncode == 0
    waited = aiptrain("jobs", "wait", job_id, "--backend", "ray", "--timeout", "120")
    assert waited.returncode == 11, waited.stderr
    log = log_text(built_on_nodes, job_id)
    assert "Cancel requested." in log and "Job cancelled." in log, log[-6000:]
    # No process of the job is left on any node (uv, the build it ran), nor a half-built environment.
    wait_until(lambda: not any(is_running(pid) for pid in builders), "the builds' processes to end", 60)
    assert tokened_processes(f"aiptrain-ray/{job_id}") == []
    for cache in built_on_nodes.cache_dirs:
        store = node_store({"AIPTRAIN_RAY_CACHE_DIR": str(cache)})
        assert not list(store.root.glob(".tmp-*"))
        assert not [entry for entry in store.entries() if str(slow) in entry.packages]


def test_a_build_that_fails_fails_the_job_naming_the_node_the_package_and_uv_s_reason(built_on_nodes, tmp_path,
                                                                                       monkeypatch):
    missing = tmp_path / "aiptrain_missing-1.0-py3-none-any.whl"
    monkeypatch.setenv("AIPTRAIN_CATALOG", str(catalog_with_extra_package(tmp_path / "catalog", str(missing))))
    job_id = "ray_env_broken"
    staged_before = [set((cache / "envs").glob(".tmp-*")) for cache in built_on_nodes.cache_dirs]
    result = aiptrain(*runtime_job(job_id, "raytrainer", "--stream-logs", user_args=("--steps", "1")))
    assert result.returncode == 10, result.stderr[-4000:]
    job = backend(built_on_nodes).get_job(job_id)
    assert job.state == "FAILED" and job.error_message is not None
    assert re.match(r"On node \S+ \(\w{8}\) \(\w+-replica-0\): Building the environment of runtime 1.15 failed: ",
                    job.error_message), job.error_message
    assert f"Distribution not found at: file://{missing}" in job.error_message
    assert "(full log: " in job.error_message
    # Its build left no half-built environment (whatever another test's killed build left, kept for
    # the next build of that environment to remove).
    for cache, before in zip(built_on_nodes.cache_dirs, staged_before, strict=True):
        assert set((cache / "envs").glob(".tmp-*")) <= before


PYTHON2_TRAINER = Path(__file__).parents[2] / "environments" / "trainers" / "py2_only" / "trainer"


def test_a_python_2_7_estimator_cluster_trains_in_environments_built_on_the_nodes(built_on_nodes):
    """Runtime 1.15 on Python 2.7: each node builds it with virtualenv and pip 20.3.4 (uv drives
    Python 3 only), and a Python-2-only trainer's master, worker and ps train on CPython 2.7."""
    job_id = "ray_env_py27"
    result = aiptrain("jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
                      "--package-path", str(PYTHON2_TRAINER), "--module-name", "trainer.task",
                      "--runtime-version", "1.15", "--python-version", "2.7", "--scale-tier", "custom",
                      "--master-machine-type", "n1-standard-4", "--worker-machine-type", "n1-standard-4",
                      "--worker-count", "1", "--parameter-server-machine-type", "n1-standard-4",
                      "--parameter-server-count", "1", "--ray-resource-scale", "0.5",
                      "--job-dir", f"gs://ray-jobs/{job_id}", "--stream-logs", timeout=1800)  # two pip builds
    assert result.returncode == 0, result.stderr[-4000:]
    logs = result.stderr
    assert "Runtime version 1.15 with Python 2.7: TensorFlow 1.15.0 on Python 2.7" in logs
    assert "py2 trainer master 0 finished on TensorFlow 1.15.0" in logs
    # The worker and the parameter server ran (the master's end stops them, as on the service).
    assert "\tworker-replica-0\t" in logs and "\tps-replica-0\t" in logs
    report = Path(os.environ["AIPTRAIN_HOME"]) / "storage" / "ray-jobs" / job_id / "report.json"
    assert '"python": "2.7.18"' in report.read_text()
    built = [build for builds in (node_store({"AIPTRAIN_RAY_CACHE_DIR": str(cache)}).builds()
                                  for cache in built_on_nodes.cache_dirs) for build in builds]
    assert any(build["python"] == "2.7" for build in built), built
