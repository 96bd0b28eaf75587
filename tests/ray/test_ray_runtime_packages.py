"""The runtime catalog's package list reaches the replicas through Ray runtime environments.

A test catalog ($AIPTRAIN_CATALOG) maps every runtime version to one tiny wheel built here, so
the wiring is exercised without installing TensorFlow: the replicas import it, the driver (in the
cluster's own environment) does not need it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aiptrain.job.catalog import catalog_path, runtimes_path
from tests.ray.harness import aiptrain

TRAINERS = Path(__file__).parent / "trainers"


@pytest.fixture
def tiny_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A catalog whose runtimes all run with one small pure-Python wheel; returns the wheel."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-w", str(wheels), str(TRAINERS / "probe_dist")], check=True, capture_output=True, timeout=300)
    wheel = next(wheels.glob("aiptrain_ray_probe-*.whl"))
    catalog_dir = tmp_path / "catalog"
    catalog_dir.mkdir()
    shutil.copy(catalog_path(), catalog_dir / "scale_tiers.yaml")
    runtimes = yaml.safe_load(runtimes_path(catalog_path()).read_text())
    runtimes["environments"] = {"tiny": {"tensorflow": "none", "reason": "a test", "packages": [str(wheel)]}}
    for runtime in runtimes["runtime_versions"].values():
        runtime["local"] = "tiny"
    (catalog_dir / "runtimes.yaml").write_text(yaml.safe_dump(runtimes))
    monkeypatch.setenv("AIPTRAIN_CATALOG", str(catalog_dir / "scale_tiers.yaml"))
    return wheel


def probe_job(job_id: str, *flags: str) -> list[str]:
    return ["jobs", "submit", "training", job_id, "--backend", "ray", "--region", "us-central1",
            "--package-path", str(TRAINERS / "raytrainer"), "--module-name", "raytrainer.task",
            "--runtime-version", "2.11", "--scale-tier", "custom", "--master-machine-type", "n1-standard-4",
            "--worker-machine-type", "n1-standard-4", "--worker-count", "1", "--ray-resource-scale", "0.25",
            "--job-dir", f"gs://ray-jobs/{job_id}", *flags,
            "--", "--steps", "1", "--step-seconds", "0", "--import-probe", "--rendezvous"]


def test_replicas_get_the_runtime_packages_through_a_ray_runtime_environment(on_cluster, tiny_catalog, monkeypatch):
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "pip")
    dry = aiptrain(*probe_job("ray_packages", "--dry-run", "--format", "json"))
    assert dry.returncode == 0, dry.stderr
    envs = json.loads(dry.stdout)["request"]["replicaRuntimeEnvs"]
    assert envs == {task: {"pip": {"packages": [str(tiny_catalog)]}} for task in ("master-replica-0",
                                                                                  "worker-replica-0")}

    result = aiptrain(*probe_job("ray_packages", "--stream-logs"))
    assert result.returncode == 0, result.stderr[-4000:]
    logs = result.stderr
    assert f"through a Ray runtime environment (pip): {tiny_catalog}" in logs
    probes = [line for line in logs.splitlines() if "probe says hello from the runtime's packages" in line]
    assert sorted(line.split("\t")[2] for line in probes) == ["master-replica-0", "worker-replica-0"]
    # Each replica's Python is the environment Ray built on its own node (SPREAD: one per node), not
    # the cluster's own, which the driver runs with and which does not have the package.
    pythons = {line.rsplit("(python ", 1)[1].rstrip(")") for line in probes}
    assert len(pythons) == 2
    for python in pythons:
        assert "runtime_resources/pip" in python and f"Python {python})" in logs


def test_with_the_cluster_python_no_runtime_environment_is_sent(tiny_catalog, monkeypatch):
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "cluster")
    dry = aiptrain(*probe_job("ray_cluster_python", "--dry-run", "--format", "json"))
    assert dry.returncode == 0, dry.stderr
    document = json.loads(dry.stdout)
    assert document["request"]["replicaRuntimeEnvs"] == {}
    assert any("AIPTRAIN_RAY_RUNTIME_PACKAGES=cluster" in line for line in document["request"]["runtimeNotes"])
    monkeypatch.setenv("AIPTRAIN_RAY_RUNTIME_PACKAGES", "conda")
    refused = aiptrain(*probe_job("ray_bad_packages", "--dry-run"))
    assert refused.returncode == 2 and "AIPTRAIN_RAY_RUNTIME_PACKAGES" in refused.stderr
