"""Which images a job runs, and what is refused before anything is created.

A job whose master names an image runs every replica as a container (worker, parameter-server
and evaluator images default to the master's). At submit, before anything is built, uploaded or
created, it is refused (exit 2) when no engine runs here (naming Docker and Podman), when one
of its images is not on this machine and pulling is off (naming the image and the command that
builds or pulls it), and when it names one of Google's built-in algorithm images, whose contents
were never published, unless an image of that name exists here. One of Google's pre-built images
running the job's Python module is no container: it runs in an environment of the image's
packages (`job.prebuilt`); a module on a pre-built image the catalog does not know is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiptrain._job.catalog import Catalog, load_catalog
from aiptrain._job.prebuilt import master_image, names_prebuilt_registry, prebuilt_image_of
from aiptrain._job.spec import ROLES, TrainingInput
from aiptrain._replicas.containers.container_engine import ContainerEngine, EngineUnavailable, find_engine
from aiptrain._replicas.containers.settings import PULL_VARIABLE, ContainerSettings
from aiptrain.errors import Problem

BUILT_IN_ALGORITHMS = "gcr.io/cloud-ml-algos/"


@dataclass(frozen=True)
class NamedImage:
    field: str  # where the job names it: trainingInput.masterConfig.imageUri
    image: str


def job_images(training_input: TrainingInput) -> list[NamedImage]:
    """Every image the job names, where it names it (the master's first)."""
    found = []
    for role in ROLES:
        config = role.config(training_input)
        if config is not None and config.image_uri:
            found.append(NamedImage(f"trainingInput.{role.config_field}.imageUri", config.image_uri))
    return found


def runs_containers(training_input: TrainingInput, catalog: Catalog | None = None) -> bool:
    """Whether the job's replicas are containers: its master names an image, which is not one of
    Google's pre-built images running the job's Python module (those run in an environment of the
    image's packages: `job.prebuilt`)."""
    if not master_image(training_input):
        return False
    return prebuilt_image_of(training_input, catalog or load_catalog()) is None


def image_present(engine: ContainerEngine, image: str) -> bool:
    return engine.run(["image", "inspect", "--format", "{{.Id}}", "--", image], check=False).returncode == 0


def container_problems(
    training_input: TrainingInput, settings: ContainerSettings,
    engine_finder: Callable[[ContainerSettings], ContainerEngine] = find_engine,
) -> list[Problem]:
    """What keeps this machine from running the job's containers; [] when it can."""
    images = job_images(training_input)
    if not images:
        return []
    catalog = load_catalog()
    if training_input.python_module and names_prebuilt_registry(training_input, catalog):
        known = sorted(name for name, image in catalog.prebuilt_images.items() if not image.runtime)
        return [Problem(images[0].field, f"{images[0].image} is not one of the pre-built images aiptrain knows, so "
                        "the environment its Python package ran in cannot be built",
                        f"name one of {', '.join(known)} (prebuilt_images.yaml), Vertex's tf-cpu.X-Y or "
                        "tf-gpu.X-Y of a runtime version, or use --runtime-version instead")]
    try:
        engine = engine_finder(settings)
    except EngineUnavailable as error:
        algorithm = next((named for named in images if named.image.startswith(BUILT_IN_ALGORITHMS)), None)
        if algorithm is not None:
            return [_built_in_algorithm(algorithm, "docker")]
        return [Problem(images[0].field, f"custom containers need a container engine, and {error.message}",
                        error.hint)]
    problems = []
    seen: set[str] = set()
    for named in images:
        if named.image in seen:
            continue
        seen.add(named.image)
        if image_present(engine, named.image):
            continue
        if named.image.startswith(BUILT_IN_ALGORITHMS):
            problems.append(_built_in_algorithm(named, engine.kind))
        elif not settings.pulls:
            problems.append(Problem(
                named.field,
                f"the image {named.image} is not on this machine ({engine.name} {engine.binary}), and images are "
                "never pulled unless asked",
                f"build it ({engine.kind} build -t {named.image} DIR) or pull it ({engine.kind} pull {named.image}), "
                f"or set {PULL_VARIABLE}=missing to let the job pull it",
            ))
    return problems


def _built_in_algorithm(named: NamedImage, engine_kind: str) -> Problem:
    return Problem(
        named.field,
        f"{named.image} is one of AI Platform's built-in algorithms, whose images and code Google never "
        "published, so it cannot run outside the service",
        f"train with your own trainer package or image instead, or make an image named {named.image} "
        f"with {engine_kind} build -t {named.image} DIR",
    )
