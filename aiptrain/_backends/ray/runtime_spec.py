"""A job's runtime, as it travels to the Ray nodes: the catalog entries its environment is built from.

The submitter's catalog decides what a runtime version holds (its TensorFlow, its Pythons, its
packages, the fallback set), as it does for a local job; a node resolves that against its own
interpreters. So the runtime's entry and the fallback recipe go in the job's payload, and a node
reads them back over the catalog it ships with (tiers and machine types are the driver's business).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiptrain._environments.for_job import job_day
from aiptrain._environments.resolution import RuntimeResolution
from aiptrain._job.catalog import Catalog, EnvironmentRecipe, Runtime, load_catalog
from aiptrain._job.era import SETTING, ResolveDay
from aiptrain._job.spec import TrainingInput


def runtime_spec(training_input: TrainingInput, catalog: Catalog, labels: dict[str, str] | None = None
                 ) -> dict[str, Any]:
    """The runtime of the job (validated: it is in the catalog), its fallback recipe and the job's
    labels (one may move the day its packages resolve as of), as JSON."""
    runtime = catalog.runtime_for(training_input.runtime_version)
    assert runtime is not None  # validated
    return {
        "runtimeVersion": training_input.runtime_version,
        "pythonVersion": training_input.python_version,
        "runtime": dataclasses.asdict(runtime),
        "fallback": dataclasses.asdict(catalog.environments[runtime.local_environment]),
        "labels": dict(labels or {}),
    }


def spec_day(spec: dict[str, Any], resolution: RuntimeResolution) -> ResolveDay:
    """The day the job's packages resolve as of on a node, in the environment the node chose."""
    return job_day(resolution, spec.get("labels"), {SETTING: str(spec.get("resolveAsOf") or "")})


def spec_training_input(spec: dict[str, Any]) -> TrainingInput:
    """What the node resolves: the job's runtime version and Python version, as submitted."""
    return TrainingInput(runtime_version=spec.get("runtimeVersion"), python_version=spec.get("pythonVersion"))


def spec_catalog(spec: dict[str, Any], base: Catalog | None = None) -> Catalog:
    """`base` (the catalog shipped with aiptrain) with the job's runtime and fallback recipe in it."""
    runtime = Runtime(**_tuples(spec["runtime"], Runtime))
    recipe = EnvironmentRecipe(**_tuples(spec["fallback"], EnvironmentRecipe))
    catalog = base or load_catalog()
    # A job that named no version resolved to the submitter's default: the node's default is that one.
    default = catalog.default_runtime_version if spec.get("runtimeVersion") else runtime.version
    return dataclasses.replace(catalog, runtimes={**catalog.runtimes, runtime.version: runtime},
                               environments={**catalog.environments, recipe.name: recipe},
                               default_runtime_version=default)


def _tuples(raw: dict[str, Any], kind: type) -> dict[str, Any]:
    """JSON lists back into the tuples the dataclass holds; unknown keys (a newer submitter's) dropped."""
    names = {field.name for field in dataclasses.fields(kind)}
    return {key: tuple(value) if isinstance(value, list) else value for key, value in raw.items() if key in names}
