"""The catalog of Google's pre-built images (prebuilt_images.yaml): found by name in any registry
and tag, each with its day and sources; the environment a job on one resolves to; the refusals at
submit of what cannot run."""

from __future__ import annotations

import datetime

from aiptrain._environments.resolution import resolve_runtime
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import TrainingInput
from aiptrain._replicas.containers.images import runs_containers

PYTORCH = "gcr.io/cloud-ml-public/training/pytorch-xla.1-6"


def inputs(image: str, **more: object) -> TrainingInput:
    return TrainingInput.model_validate({"region": "us-central1", "masterConfig": {"imageUri": image},
                                         "packageUris": ["gs://b/trainer-0.1.tar.gz"], **more})


def test_every_image_is_found_by_name_in_each_registry_with_its_day_and_sources() -> None:
    catalog = load_catalog()
    for registry in catalog.prebuilt_registries:
        for tag in ("", ":latest"):
            found = catalog.prebuilt_image(f"{registry}pytorch-cpu.1-4{tag}")
            assert found is not None and found.framework == "PyTorch 1.4"
    assert catalog.prebuilt_image("gcr.io/my-project/pytorch-cpu.1-4") is None
    assert catalog.prebuilt_image("gcr.io/cloud-ml-public/training/sub/pytorch-cpu.1-4") is None
    sources = set(catalog.sources) | {"AS", "DOCS-PT", "SCRIPTS", "VX-PB", "PyPI", "R-prebuilt"}
    for image in catalog.prebuilt_images.values():
        if image.runtime:
            assert image.runtime in catalog.runtimes
            continue
        assert datetime.date.fromisoformat(image.cutoff) and image.pythons and image.source
        assert any(key in image.source for key in sources)
        framework = image.framework.split()[0].lower().replace("pytorch", "torch")
        assert any(package.startswith(framework) and "==" in package for package in image.packages), image


def test_a_module_on_a_pre_built_image_resolves_to_the_images_environment_not_a_container() -> None:
    catalog = load_catalog()
    job_input = inputs(PYTORCH, pythonModule="trainer.task")
    assert not runs_containers(job_input, catalog)
    assert runs_containers(inputs(PYTORCH), catalog)  # without a module the image runs as it is
    resolution = resolve_runtime(job_input, catalog)
    assert resolution.packages[0] == "torch==1.6.*" and resolution.cutoff == "2020-10-26"
    assert resolution.python == "3.7" and resolution.warnings() == [] and resolution.honours_ca_bundle
    assert "torch_xla is not installed" in resolution.summary() and "nearest set that installs" in resolution.summary()
    executor = resolve_runtime(inputs("asia-docker.pkg.dev/vertex-ai/training/tf-gpu.2-3:latest",
                                      pythonModule="trainer.task"), catalog)
    assert executor.version == "2.3" and executor.warnings() == []  # its runtime version, nothing to add
