"""What a job naming an image cannot run is refused at submit with the reason, engine or not:
a module on a pre-built image the catalog does not know, a built-in algorithm image."""

from __future__ import annotations

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import TrainingInput, parse_job
from aiptrain._replicas.cluster_plan import local_problems
from aiptrain._replicas.settings import ReplicaSettings


def inputs(image: str) -> TrainingInput:
    return TrainingInput.model_validate({"region": "us-central1", "masterConfig": {"imageUri": image},
                                         "packageUris": ["gs://b/trainer-0.1.tar.gz"], "pythonModule": "trainer.task"})


@pytest.mark.parametrize(("image", "field_says"), [
    ("gcr.io/cloud-ml-public/training/pytorch-cpu.9-9", "is not one of the pre-built images aiptrain knows"),
    ("gcr.io/cloud-ml-algos/boosted_trees:latest", "built-in algorithms, whose images and code Google never"),
])
def test_what_cannot_run_is_refused_at_submit_naming_why(image: str, field_says: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_CONTAINER_ENGINE", "/nonexistent/docker")  # no engine on this machine
    job = parse_job({"jobId": "j", "trainingInput": inputs(image).to_api()})
    problems = local_problems(job, load_catalog(), ReplicaSettings.from_env())
    assert [problem.path for problem in problems] == ["trainingInput.masterConfig.imageUri"]
    assert field_says in problems[0].message
