"""Which of Google's pre-built training images a job runs its Python package on (prebuilt_images.yaml).

A job whose master names a pre-built image and a Python module ran, on the service, the image's
Python with the job's packages installed: here it runs in an environment of the image's packages,
built like a runtime version's, and needs no container engine. A pre-built image named without a
module runs as it is, a container like any other image.
"""

from __future__ import annotations

from aiptrain._job.catalog import Catalog, PrebuiltImage
from aiptrain._job.spec import TrainingInput


def master_image(training_input: TrainingInput) -> str:
    master = training_input.master_config
    return (master.image_uri or "") if master is not None else ""


def prebuilt_image_of(training_input: TrainingInput, catalog: Catalog) -> PrebuiltImage | None:
    """The pre-built image whose environment runs the job's module; None when it runs no such image."""
    if not training_input.python_module:
        return None
    return catalog.prebuilt_image(master_image(training_input))


def names_prebuilt_registry(training_input: TrainingInput, catalog: Catalog) -> bool:
    """Whether the master image is under one of Google's pre-built registries (known or not)."""
    image = master_image(training_input)
    return any(image.startswith(registry) for registry in catalog.prebuilt_registries)
