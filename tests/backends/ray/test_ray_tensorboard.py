"""`aiptrain jobs tensorboard` on a Ray job: the job's gs:// job dir is mapped to this machine's
store on the cluster's nodes, and TensorBoard (installed on demand: a Ray job records no runtime
environment to borrow one from) serves the scalars its trainer wrote there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.ray.cluster import RayCluster
from tests.backends.ray.harness import aiptrain
from tests.fixtures.tensorboard import LOSSES, get_json, losses, summary_trainer, tensorboard_command

pytestmark = pytest.mark.ray_cluster


def test_tensorboard_serves_a_ray_jobs_scalars(on_cluster: RayCluster, tmp_path: Path) -> None:
    package = summary_trainer(tmp_path)
    submitted = aiptrain("jobs", "submit", "training", "ray_tb", "--backend", "ray", "--region", "us-central1",
                         "--package-path", str(package), "--module-name", "trainer.task",
                         "--runtime-version", "2.11", "--ray-resource-scale", "0.25",
                         "--job-dir", "gs://ray-jobs/ray_tb", "--stream-logs")
    assert submitted.returncode == 0, submitted.stderr
    with tensorboard_command("ray_tb", "--backend", "ray") as url:
        assert get_json(url + "data/runs") == ["."]
        assert losses(url, ".") == LOSSES
