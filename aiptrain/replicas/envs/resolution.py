"""Which local environment a runtime version runs in, and what that substitutes (pure).

Runtime 2.1 shipped TensorFlow 2.1 for Python 3.7; neither installs on this machine's Python, so
the job runs on the runtime's environment recipe (e.g. TensorFlow 2.15.1 on Python 3.11). The
substitution is said once, in the same words, in the job's first log lines, `jobs describe` and
`--dry-run`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from aiptrain.errors import UsageError
from aiptrain.job.catalog import Catalog, EnvironmentRecipe, Runtime
from aiptrain.job.spec import TrainingInput


def local_python_version() -> str:
    """The Python environments are built for: the one aiptrain runs on (major.minor)."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class RuntimeResolution:
    """A job's runtime version and the environment it runs in here."""

    asked: str | None  # trainingInput.runtimeVersion as given (None: the service's default)
    runtime: Runtime
    recipe: EnvironmentRecipe
    python: str  # the local Python (major.minor)
    python_asked: str | None

    @property
    def version(self) -> str:
        return self.runtime.version

    @property
    def packages(self) -> tuple[str, ...]:
        return self.recipe.packages

    def summary(self) -> str:
        """One line: what was asked, what runs, and why."""
        asked = self.version if self.asked else f"{self.version} (the service's default when none is given)"
        python = self.python_asked or "/".join(self.runtime.python)
        line = (f"Runtime version {asked} shipped TensorFlow {self.runtime.tensorflow} for Python {python}; "
                f"here it runs TensorFlow {self.recipe.tensorflow} on Python {self.python}")
        if self.runtime.tensorflow != self.recipe.tensorflow:
            line += f" (TensorFlow {self.runtime.tensorflow}: " + self.recipe.reason.format(python=self.python) + ")"
        return line + "."

    def notes(self) -> list[str]:
        """Every line to show: the summary, then TF 1 and package notes."""
        lines = [self.summary()]
        if self.runtime.tensorflow.startswith("1.") and self.recipe.tf1_note:
            lines.append(self.recipe.tf1_note + ".")
        lines.append("Runtime packages: " + ", ".join(package_label(p) for p in self.packages) + ".")
        return lines

    def warnings(self) -> list[str]:
        return self.runtime.warnings()


def package_label(requirement: str) -> str:
    """`tensorflow-cpu==2.15.1` -> `tensorflow-cpu 2.15.1`."""
    name, _, version = requirement.partition("==")
    return f"{name} {version}".strip()


def resolve_runtime(training_input: TrainingInput, catalog: Catalog) -> RuntimeResolution:
    """The runtime of a job (validated already: an unknown version is a KeyError here)."""
    runtime = catalog.runtime_for(training_input.runtime_version)
    if runtime is None:
        raise KeyError(training_input.runtime_version)
    return RuntimeResolution(
        asked=training_input.runtime_version,
        runtime=runtime,
        recipe=catalog.environments[runtime.local_environment],
        python=local_python_version(),
        python_asked=training_input.python_version,
    )


def resolve_version(version: str, catalog: Catalog) -> RuntimeResolution | None:
    """The resolution of a bare version (`aiptrain local envs build 2.1`), None if unknown."""
    if version not in catalog.runtimes:
        return None
    return resolve_runtime(TrainingInput(runtime_version=version), catalog)


def require_version(version: str, catalog: Catalog) -> RuntimeResolution:
    """`resolve_version`, or a UsageError that lists the known versions."""
    resolution = resolve_version(version, catalog)
    if resolution is None:
        listed = ", ".join(catalog.runtimes)
        raise UsageError(f"unknown runtime version {version!r}", hint=f"runtime versions: {listed}")
    return resolution
