"""Which environment a job's runtime version runs in on this machine, and why: the one place
`--runtime-version` and `--python-version` become an interpreter and a package list.

A runtime runs on its own TensorFlow release and packages (runtimes.yaml), on the Python that was
asked for (or the service's default for the runtime: 2.7 for every 1.x) when an interpreter of it is
found here (`interpreters`). Python 2.7 runs on CPython 2.7 or not at all: where none is found the
job fails naming it, unless AIPTRAIN_PYTHON2_MISSING=python3 lets it run on the runtime's nearest
Python 3. Where the asked Python has no build of that TensorFlow (3.5), or none of it is found, the
runtime's nearest Python with one is taken; where none of those can be had, not
even by a download, the fallback environment (TensorFlow 2.15, Keras 2, tf.compat.v1) on the
nearest Python it installs on. Every such choice is said once, in the same words, in the job's
first log lines, `jobs describe` and `--dry-run`. Only when nothing at all can run the job does
it fail, in PREPARING, naming what was looked for and how to get it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiptrain._environments import interpreters
from aiptrain._environments.interpreters import Interpreter
from aiptrain._job.catalog import Catalog, Runtime, vertex_image_python
from aiptrain._job.prebuilt import master_image, prebuilt_image_of
from aiptrain._job.spec import TrainingInput
from aiptrain.errors import UsageError

Finder = Callable[[str, Mapping[str, str] | None], Interpreter | None]
# Python 2.7: built with virtualenv and the pip of its day (`virtualenv_build`), never by uv. Every
# TensorFlow 1.x that the service ran on 2.7 has Linux wheels for it, so no runtime substitutes another.
PYTHON2 = "2.7"
# What a 2.7 job does on a machine without CPython 2.7: `fail` (naming it), or `python3`.
PYTHON2_MISSING_SETTING = "AIPTRAIN_PYTHON2_MISSING"
_PYTHON2_ON_PYTHON3 = "python3"
# A Python no TensorFlow wheel was made for on Linux after 2019: a runtime asked for it runs on its
# nearest Python 3.
_UNBUILDABLE = ("3.5",)
# The first TensorFlow whose GCS filesystem takes its CA bundle from CURL_CA_BUNDLE (read off the
# wheels: 2.4.4 has it; 2.1 and 1.15, every patch, only know /etc/ssl/certs/ca-certificates.crt).
_CA_BUNDLE_SINCE = (2, 4)


@dataclass(frozen=True)
class RuntimeResolution:
    """A job's runtime version and the environment it runs in here."""

    asked: str | None  # trainingInput.runtimeVersion as given (None: the service's default)
    runtime: Runtime
    python_asked: str | None  # trainingInput.pythonVersion as given
    name: str  # the environment's name: runtime-<version>, or the fallback's
    tensorflow: str  # the TensorFlow release that runs
    packages: tuple[str, ...]  # everything the environment installs, TensorFlow first
    python: str  # the Python it runs on (major.minor)
    interpreter: Interpreter | None  # None: not found (to be downloaded, or nothing can run it)
    fallback: bool = False
    why: str = ""  # why the Python or the TensorFlow differs from what was asked, if it does
    problem: str | None = None  # set when nothing can run the job: the job's errorMessage
    tf1_note: str = ""
    gpu_packages: dict[str, str] = field(default_factory=dict)
    alternatives: tuple[str, ...] = ()  # the runtime's Pythons, best first (what a download may fetch)
    cutoff: str = ""  # the runtime's day, which its environment is built as of ("": the fallback's, today)
    # uv's reading of metadata it cannot parse, for packages of the set ("pandas==0.24.2" -> requirements)
    dependency_metadata: dict[str, tuple[str, ...]] = field(default_factory=dict)
    image: str = ""  # the pre-built image whose environment this is (prebuilt_images.yaml), as the job named it
    image_note: str = ""  # what of that image is not there

    @property
    def version(self) -> str:
        return self.runtime.version

    @property
    def honours_ca_bundle(self) -> bool:
        """Whether this TensorFlow's gs:// client can be pointed at the job's storage endpoint."""
        if not self.tensorflow:
            return True  # no TensorFlow: every gs:// client there takes CURL_CA_BUNDLE or the emulator's host
        major, minor = (int(part) for part in self.tensorflow.split(".")[:2])
        return (major, minor) >= _CA_BUNDLE_SINCE

    @property
    def needs_download(self) -> bool:
        return self.interpreter is None and self.problem is None

    @property
    def python_label(self) -> str:
        if self.python_asked:
            return self.python_asked
        if self.runtime.python_is_required:
            return f"{self.runtime.default_python} (the only one runtime {self.version} supports)"
        return f"{self.runtime.default_python} (the service's default)"

    def summary(self) -> str:
        """One line: what was asked, what runs, on which interpreter, and why."""
        asked = self.version if self.asked else f"{self.version} (the service's default when none is given)"
        if self.image and self.runtime.image:
            return self._image_summary()
        if self.problem is not None:
            return f"Runtime version {asked} with Python {self.python_label} cannot run here: {self.problem}"
        where = (f"{self.interpreter.path}, found via {self.interpreter.source}" if self.interpreter is not None
                 else f"to be downloaded by uv: no Python {self.python} was found here")
        line = (f"Runtime version {asked} with Python {self.python_label}: TensorFlow {self.tensorflow} "
                f"on Python {self.python} ({where})")
        return line + (f"; {self.why}." if self.why else ".")

    def _image_summary(self) -> str:
        """The summary of a pre-built image's environment (its packages follow in `notes`)."""
        named = f"The pre-built image {self.image} ({self.runtime.image})"
        if self.problem is not None:
            return f"{named} cannot run here: {self.problem}"
        where = (f"{self.interpreter.path}, found via {self.interpreter.source}" if self.interpreter is not None
                 else f"to be downloaded by uv: no Python {self.python} was found here")
        line = (f"{named} runs in an environment of its packages on Python {self.python} ({where}), as of "
                f"{self.cutoff}: Google never published its full package list, so this is the nearest set that "
                "installs (prebuilt_images.yaml)")
        return line + (f"; {self.image_note}." if self.image_note else ".")

    def notes(self) -> list[str]:
        """Every line to show: the summary, the TF 1 note of a fallback, the packages."""
        lines = [self.summary()]
        if self.problem is not None:
            return lines
        if self.fallback and self.runtime.tensorflow.startswith("1.") and self.tf1_note:
            lines.append(self.tf1_note + ".")
        lines.append("Runtime packages: " + ", ".join(package_label(p) for p in self.packages) + ".")
        return lines

    def warnings(self) -> list[str]:
        if self.runtime.image:
            return []  # the image brings its own; no runtime version is named or defaulted
        return self.runtime.warnings(named=self.asked is not None, python_named=self.python_asked is not None)


def package_label(requirement: str) -> str:
    """`tensorflow-cpu==2.15.1` -> `tensorflow-cpu 2.15.1`."""
    name, _, version = requirement.partition("==")
    return f"{name} {version}".strip()


def resolve_runtime(
    training_input: TrainingInput,
    catalog: Catalog,
    *,
    find: Finder = interpreters.find,
    env: Mapping[str, str] | None = None,
    downloads: bool | None = None,
) -> RuntimeResolution:
    """The environment of a job (validated already: an unknown version is a KeyError here).

    `downloads` (default: whether AIPTRAIN_PYTHON_DOWNLOADS allows them) decides whether a Python
    that is not found is to be downloaded, or the fallback taken at once.
    """
    image = prebuilt_image_of(training_input, catalog)
    if image is not None and image.runtime:  # a TensorFlow executor image: its runtime version's environment
        executor = catalog.runtimes[image.runtime]
        # Vertex's images never ran Python 2 (its 1.15 images run 3.7): the image's Python, where 2.7 was the default.
        python = (executor.default_python if executor.default_python in executor.pythons
                  else vertex_image_python(master_image(training_input)))
        training_input = training_input.model_copy(update={"runtime_version": image.runtime,
                                                           "python_version": python})
    runtime = image.as_runtime() if image is not None and not image.runtime else (
        catalog.runtime_for(training_input.runtime_version))
    if runtime is None:
        raise KeyError(training_input.runtime_version)
    asked_python = training_input.python_version or runtime.default_python
    candidates = _python_order(runtime, asked_python)

    def own(python: str, found: Interpreter | None, *, why: str = "", problem: str | None = None) -> RuntimeResolution:
        return RuntimeResolution(
            asked=training_input.runtime_version, runtime=runtime, python_asked=training_input.python_version,
            name=f"image-{runtime.version}" if runtime.image else f"runtime-{runtime.version}",
            tensorflow=runtime.tensorflow,
            packages=tuple(p for p in (runtime.tensorflow_requirement, *runtime.packages) if p), python=python,
            interpreter=found, why=why, problem=problem, gpu_packages=_gpu_variant(runtime),
            alternatives=tuple(candidates), cutoff=runtime.cutoff,
            dependency_metadata=dict(runtime.dependency_metadata),
            image=master_image(training_input) if image is not None else "",
            image_note=image.note if image is not None else "")

    if asked_python == PYTHON2 and PYTHON2 in runtime.python and not runtime.image:
        if find(PYTHON2, env) is not None:
            candidates = [PYTHON2]  # every 1.x TensorFlow the service ran on 2.7 has its Linux wheels
        elif not python2_may_run_on_python3(env):
            return own(PYTHON2, None, problem=(
                f"no Python {PYTHON2} was found here (looked in {interpreters.where_looked(PYTHON2, env)}). To run it, "
                f"{interpreters.how_to_get(PYTHON2)}; or set {PYTHON2_MISSING_SETTING}={_PYTHON2_ON_PYTHON3} to run it "
                "on the runtime's nearest Python 3"))
    for python in candidates:
        found = find(python, env)
        if found is not None:
            return own(python, found, why=_why_python(runtime, asked_python, python, candidates, env))
    allowed = interpreters.downloads_allowed(env) if downloads is None else downloads
    if candidates and allowed:
        return own(candidates[0], None, why=_why_python(runtime, asked_python, candidates[0], candidates, env))
    looked = ", ".join(candidates) or "none has a Linux build"
    if runtime.image:  # an image's set has no fallback: only its own Python runs it
        return own(candidates[0], None, problem=(
            f"no Python {looked} was found here (looked in {interpreters.where_looked(candidates[0], env)}). To run "
            f"it, {interpreters.how_to_get(candidates[0])}"))
    recipe = catalog.environments[runtime.local_environment]
    where = interpreters.where_looked(candidates[0] if candidates else recipe.pythons[-1], env)
    for python in sorted(recipe.pythons, key=lambda p: _distance(p, asked_python)):
        found = find(python, env)
        if found is not None:
            why = (f"no Python that TensorFlow {runtime.tensorflow} installs on ({looked}) was found here (looked in "
                   f"{where}), so it runs the fallback environment: {recipe.reason}")
            return RuntimeResolution(
                asked=training_input.runtime_version, runtime=runtime, python_asked=training_input.python_version,
                name=recipe.name, tensorflow=recipe.tensorflow, packages=recipe.packages, python=python,
                interpreter=found, fallback=True, why=why, tf1_note=recipe.tf1_note,
                gpu_packages=dict(recipe.gpu_packages))
    wanted = candidates[0] if candidates else recipe.pythons[-1]
    return own(wanted, None, problem=(
        f"no Python that TensorFlow {runtime.tensorflow} installs on ({looked}) was found, nor one for the fallback "
        f"TensorFlow {recipe.tensorflow} ({', '.join(recipe.pythons)}); looked in {where}. To run it, "
        f"{interpreters.how_to_get(wanted)}"))


def python2_may_run_on_python3(env: Mapping[str, str] | None = None) -> bool:
    """Whether AIPTRAIN_PYTHON2_MISSING lets a 2.7 job run on Python 3 where no 2.7 is found
    (`fail`, the default, or `python3`); another value is the user's error, named."""
    raw = (os.environ if env is None else env).get(PYTHON2_MISSING_SETTING, "").strip().lower()
    if raw in ("", "fail"):
        return False
    if raw == _PYTHON2_ON_PYTHON3:
        return True
    raise UsageError(f"{PYTHON2_MISSING_SETTING}={raw!r} is neither `fail` nor `{_PYTHON2_ON_PYTHON3}`",
                     hint=f"set {PYTHON2_MISSING_SETTING}=fail (a Python 2.7 job without CPython 2.7 fails) or "
                          f"{PYTHON2_MISSING_SETTING}={_PYTHON2_ON_PYTHON3} (it runs on the nearest Python 3)")


def _python_order(runtime: Runtime, asked: str) -> list[str]:
    """The runtime's Pythons to try, best first: the asked one if its TensorFlow has a build for
    it, then the others in the catalog's order (nearest first)."""
    if asked in runtime.pythons:
        return [asked, *(p for p in runtime.pythons if p != asked)]
    return list(runtime.pythons)


def _why_python(runtime: Runtime, asked: str, chosen: str, candidates: list[str],
                env: Mapping[str, str] | None) -> str:
    if chosen == asked:
        return ""
    if asked == PYTHON2:
        return (f"no Python {PYTHON2} was found here (looked in {interpreters.where_looked(PYTHON2, env)}), and "
                f"{PYTHON2_MISSING_SETTING}={_PYTHON2_ON_PYTHON3} runs it on {chosen}, the nearest Python 3 with a "
                f"TensorFlow {runtime.tensorflow_minor} build")
    if asked in _UNBUILDABLE:
        return (f"TensorFlow {runtime.tensorflow_minor} has no Linux build for Python {asked} that installs today, and "
                f"{chosen} is the nearest Python 3 with one")
    if asked not in runtime.pythons:
        return f"TensorFlow {runtime.tensorflow} has no build for Python {asked}; {chosen} is the nearest that has one"
    skipped = candidates[: candidates.index(chosen)]
    return (f"no Python {', '.join(skipped)} was found here (looked in {interpreters.where_looked(skipped[0], env)}), "
            f"and {chosen} is the nearest with a TensorFlow {runtime.tensorflow_minor} build")


def _gpu_variant(runtime: Runtime) -> dict[str, str]:
    """The requirement that brings the runtime's TensorFlow with CUDA, where a GPU is present."""
    name, _, version = runtime.tensorflow_requirement.partition("==")
    if name == "tensorflow-cpu":
        return {runtime.tensorflow_requirement: f"tensorflow=={version}"}
    if name == "tensorflow" and runtime.tensorflow_minor not in ("1.15",) and version.startswith("1."):
        return {runtime.tensorflow_requirement: f"tensorflow-gpu=={version}"}  # 1.15 ships both in one
    return {}


def _distance(python: str, asked: str) -> tuple[int, int]:
    major, minor = (int(part) for part in python.split("."))
    asked_major, asked_minor = (int(part) for part in asked.split("."))
    return abs((major * 100 + minor) - (max(asked_major, 3) * 100 + asked_minor)), -minor


def resolve_version(version: str, catalog: Catalog, *, python: str | None = None) -> RuntimeResolution | None:
    """The resolution of a bare version (`aiptrain local envs build 2.1`), None if unknown."""
    if version not in catalog.runtimes:
        return None
    return resolve_runtime(TrainingInput(runtime_version=version, python_version=python), catalog)


def require_version(version: str, catalog: Catalog, *, python: str | None = None) -> RuntimeResolution:
    """`resolve_version`, or a UsageError that lists the known versions."""
    resolution = resolve_version(version, catalog, python=python)
    if resolution is None:
        listed = ", ".join(catalog.runtimes)
        raise UsageError(f"unknown runtime version {version!r}", hint=f"runtime versions: {listed}")
    return resolution
