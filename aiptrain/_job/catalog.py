"""Loads `scale_tiers.yaml` (tiers, machine types, accelerators, regions, limits),
`runtimes.yaml` (runtime versions and the local environments they run in) and
`prebuilt_images.yaml` (Google's pre-built training images and what each had).

Every catalog value lives in the YAML files; this module only gives it types. The files are found
next to the repository root in a checkout and as package data (`aiptrain/data`) in a wheel.
"""

from __future__ import annotations

import datetime
import functools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aiptrain.errors import InternalError

ROLES = ("master", "worker", "parameter_server", "evaluator")


@dataclass(frozen=True)
class AcceleratorSpec:
    type: str
    count: int


@dataclass(frozen=True)
class RoleSpec:
    """One role of a predefined tier: its machine type, replica count and accelerator."""

    type: str
    count: int = 1
    accelerator: AcceleratorSpec | None = None


@dataclass(frozen=True)
class Tier:
    name: str
    description: str
    roles: dict[str, RoleSpec]
    custom: bool = False
    verified: bool = True
    ml_units_per_hour: float | None = None


@dataclass(frozen=True)
class MachineType:
    name: str
    family: str  # compute_engine | legacy | tpu
    vcpus: int = 0
    memory_gb: float = 0.0
    accelerator_family: str | None = None
    compute_engine: str | None = None  # legacy types: the Compute Engine equivalent
    builtin_accelerator: AcceleratorSpec | None = None
    gpus: int | None = None  # machines whose GPU count is fixed by the type (a2)
    vertex_machine_type: str | None = None
    verified: bool = True
    # False: a type the catalog needs (a tier's composition, a legacy type's equivalent) that the
    # service did not accept in a job's *Type fields.
    selectable: bool = True


@dataclass(frozen=True)
class AttachmentRule:
    counts: tuple[int, ...]
    max_vcpus: dict[int, int] = field(default_factory=dict)
    exact_per_machine: bool = False


@dataclass(frozen=True)
class EnvironmentRecipe:
    """The fallback package set: what a runtime runs in when no Python for its own TensorFlow
    can be had here (one virtual environment per Python it is built on)."""

    name: str
    tensorflow: str
    packages: tuple[str, ...]
    reason: str  # why this set serves as the fallback
    pythons: tuple[str, ...] = ()  # the Pythons its packages install on
    tf1_note: str = ""
    gpu_packages: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Runtime:
    version: str
    tensorflow: str  # the release it runs, e.g. 1.15.0
    python: tuple[str, ...]  # what the service accepted as --python-version
    vertex_images: dict[str, str] | None  # the pre-built images ({cpu, gpu, ...}) a job runs by default
    verified: bool = True
    retired: bool = False
    local_environment: str = ""  # the fallback environment
    default_python: str = ""  # the service's choice without --python-version
    tensorflow_requirement: str = ""  # e.g. tensorflow-cpu==2.1.0
    pythons: tuple[str, ...] = ()  # the CPython 3 versions its TensorFlow has Linux wheels for, best first
    packages: tuple[str, ...] = ()  # the image's other packages, pinned
    # Every set of Vertex AI images by the Python they run (the default set included).
    vertex_images_by_python: dict[str, dict[str, str]] = field(default_factory=dict)
    package_set: str = ""  # the name of that set in runtimes.yaml
    released: str = ""  # YYYY-MM-DD: the release, or a lower bound of it (`released_bound`)
    released_bound: bool = False
    cutoff: str = ""  # YYYY-MM-DD: the runtime's day; its packages were all uploaded by its end
    source: str = ""  # the keys of `Catalog.sources` (and what they say) behind this entry
    # Requires-Dist that uv is given for packages of the set whose own metadata it cannot parse
    # ("pandas==0.24.2" -> its requirements as pip read them).
    dependency_metadata: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # A pre-built image's framework ("PyTorch 1.4") when this entry stands for one (`PrebuiltImage`).
    image: str = ""

    @property
    def tensorflow_minor(self) -> str:
        return ".".join(self.tensorflow.split(".")[:2])

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])

    def warnings(self, *, named: bool = True, python_named: bool = True) -> list[str]:
        """What a job on this runtime is told at submit, whatever the backend; `named` False: the
        job named no runtime version and got this one as the service's default; `python_named`
        False: it named no Python version."""
        if not named:
            return [f"no --runtime-version given: the job runs runtime {self.version}, as AI Platform Training "
                    f"ran such jobs until 2020-01-13 (it refused them after); choose one with --runtime-version "
                    "(1.15 or 2.x)"]
        found = []
        if self.retired:
            found.append(f"runtime version {self.version} was retired by AI Platform Training (it refused new "
                         "jobs); it is accepted here and runs in the environment shown, but move to 1.15 or 2.x "
                         "when you can")
        if not python_named and self.python_is_required:
            found.append(f"no --python-version given: runtime {self.version} runs Python {self.default_python}, "
                         "the only one it supports (AI Platform Training refused 2.x jobs without one); add "
                         f"--python-version {self.default_python}")
        return found

    @property
    def python_is_required(self) -> bool:
        """Whether the service refused a job of this runtime without a Python version (2.x, ERR):
        it ran only one, and had no default."""
        return self.major >= 2 and len(self.python) == 1


@dataclass(frozen=True)
class PrebuiltImage:
    """One of Google's pre-built training images (prebuilt_images.yaml): a job naming it with a
    Python package runs in an environment of its packages, built like a runtime version's; a
    Vertex TensorFlow executor image is its runtime version's (`runtime`)."""

    name: str  # the name the job wrote, without registry or tag: pytorch-cpu.1-4
    framework: str = ""  # "PyTorch 1.4"
    pythons: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    cutoff: str = ""
    note: str = ""  # what of the image is not there (an XLA image's torch_xla)
    source: str = ""
    runtime: str = ""  # a TensorFlow executor image: the runtime version it is

    def as_runtime(self) -> Runtime:
        """The image as a runtime entry: what the environment builder and the day's rules read."""
        return Runtime(version=self.name, tensorflow="", python=self.pythons, vertex_images=None, verified=False,
                       default_python=self.pythons[0], pythons=self.pythons, packages=self.packages,
                       cutoff=self.cutoff, source=self.source, image=self.framework)


@dataclass(frozen=True)
class Catalog:
    tiers: dict[str, Tier]
    machine_types: dict[str, MachineType]
    accelerators: dict[str, dict[str, Any]]
    attachment: dict[str, dict[str, AttachmentRule]]
    regions: dict[str, tuple[str, ...]]
    runtimes: dict[str, Runtime]
    default_runtime_version: str
    environments: dict[str, EnvironmentRecipe]
    limits: dict[str, Any]
    source: Path
    zones: dict[str, str] = field(default_factory=dict)  # a region's zone where `<region>-a` is none
    sources: dict[str, str] = field(default_factory=dict)  # runtimes.yaml's source keys and what they are
    prebuilt_images: dict[str, PrebuiltImage] = field(default_factory=dict)  # by name (`image_name`)
    prebuilt_registries: tuple[str, ...] = ()

    def prebuilt_image(self, uri: str | None) -> PrebuiltImage | None:
        """The pre-built image `uri` names (any of its registries, any tag), None for another image."""
        name = image_name(uri or "", self.prebuilt_registries)
        return self.prebuilt_images.get(name) if name else None

    def runtime_for(self, version: str | None) -> Runtime | None:
        """The runtime a job's `runtimeVersion` names (the service's default when it names none);
        None for a version the catalog does not know (validation reports those). The one lookup
        of a runtime version: every layer asks here."""
        return self.runtimes.get(self.runtime_version_for(version))

    def runtime_version_for(self, version: str | None) -> str:
        """The version a job runs: the one it names, else what the service ran without one."""
        return version or self.default_runtime_version

    @property
    def newest_runtime_version(self) -> str:
        """The newest runtime version of the catalog (`local train`'s default)."""
        return max(self.runtimes, key=lambda version: tuple(int(part) for part in version.split(".")))

    def vcpus(self, machine_type: str | None) -> int:
        """A machine type's vCPUs (a legacy type's through its Compute Engine equivalent); 0 when unknown."""
        machine = self.machine_types.get(machine_type or "")
        if machine is None:
            return 0
        if not machine.vcpus and machine.compute_engine:
            return self.vcpus(machine.compute_engine)
        return machine.vcpus

    def zone_of(self, region: str) -> str:
        """The zone a job's VM of `region` ran in, as its metadata server names it."""
        return self.zones.get(region, f"{region}-a")

    def vertex_accelerator(self, name: str) -> str | None:
        value = self.accelerators.get(name, {}).get("vertex")
        return str(value) if value else None


def catalog_path() -> Path:
    """The YAML file: $AIPTRAIN_CATALOG, else the packaged copy (a symlink to the root file in a checkout)."""
    override = os.environ.get("AIPTRAIN_CATALOG")
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "data" / "scale_tiers.yaml"


def runtimes_path(catalog: Path) -> Path:
    """`runtimes.yaml` beside the catalog, else the packaged copy (an $AIPTRAIN_CATALOG elsewhere)."""
    beside = catalog.with_name("runtimes.yaml")
    if beside.is_file():
        return beside
    return Path(__file__).resolve().parent.parent / "data" / "runtimes.yaml"


def prebuilt_images_path(catalog: Path) -> Path:
    """`prebuilt_images.yaml` beside the catalog, else the packaged copy."""
    beside = catalog.with_name("prebuilt_images.yaml")
    if beside.is_file():
        return beside
    return Path(__file__).resolve().parent.parent / "data" / "prebuilt_images.yaml"


def image_name(uri: str, registries: tuple[str, ...]) -> str:
    """`us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-4:latest` -> `pytorch-cpu.1-4` when it is
    under one of `registries`; "" otherwise."""
    for registry in registries:
        if uri.startswith(registry):
            rest = uri[len(registry):].split("@", 1)[0]
            return rest.split(":", 1)[0] if "/" not in rest else ""
    return ""


def _prebuilt_images(raw: dict[str, Any], runtimes: dict[str, Runtime]) -> dict[str, PrebuiltImage]:
    found = {}
    for key, spec in (raw.get("images") or {}).items():
        pythons = tuple(str(p) for p in spec["python"])
        cutoff = str(spec.get("cutoff", ""))
        if cutoff and not _is_day(cutoff):
            raise ValueError(f"pre-built image {key}: cutoff {cutoff!r} is not a YYYY-MM-DD date (quote it)")
        for name in spec["names"]:
            found[str(name)] = PrebuiltImage(
                name=str(name), framework=str(spec["framework"]), pythons=pythons,
                packages=tuple(str(p) for p in spec["packages"]), cutoff=cutoff, note=str(spec.get("note", "")),
                source=str(spec.get("source", "")))
    registries = tuple(str(r) for r in raw.get("registries") or ())
    for runtime in runtimes.values():  # Vertex's TensorFlow executor images are runtime versions
        for uri in (runtime.vertex_images or {}).values():
            name = image_name(uri, registries)
            if name:
                found.setdefault(name, PrebuiltImage(name=name, runtime=runtime.version))
    return found


def _accelerator(raw: dict[str, Any] | None) -> AcceleratorSpec | None:
    if not raw:
        return None
    return AcceleratorSpec(type=str(raw["type"]), count=int(raw["count"]))


def _package_set(name: str, spec: Any) -> tuple[str, ...]:
    """A set's pinned packages (`{source, verified, packages}`, or a bare list)."""
    packages = spec.get("packages") if isinstance(spec, dict) else spec
    if not isinstance(packages, list):
        raise ValueError(f"the package set {name!r} lists no packages")
    return tuple(str(p) for p in packages)


def _runtime(version: str, spec: dict[str, Any], fallback: str, package_sets: dict[str, tuple[str, ...]],
             metadata: dict[str, tuple[str, ...]]) -> Runtime:
    named = spec.get("packages", ())
    if isinstance(named, str):
        if named not in package_sets:
            raise ValueError(f"runtime {version} names the unknown package set {named!r}")
        packages, set_name = package_sets[named], named
    else:
        packages, set_name = tuple(str(p) for p in named), ""
    for day in ("released", "cutoff"):
        if day in spec and not _is_day(str(spec[day])):
            raise ValueError(f"runtime {version}: {day} {spec[day]!r} is not a YYYY-MM-DD date (quote it)")
    requirement = str(spec["tensorflow"])
    return Runtime(
        version=version,
        tensorflow=requirement.partition("==")[2] or requirement,
        python=tuple(str(p) for p in spec["python"]),
        vertex_images=dict(spec["vertex"]) if spec.get("vertex") else None,
        verified=bool(spec.get("verified", True)),
        retired=spec.get("status") == "retired",
        local_environment=str(spec.get("local", fallback)),
        default_python=str(spec.get("default_python", spec["python"][0])),
        tensorflow_requirement=requirement if "==" in requirement else "",
        pythons=tuple(str(p) for p in spec.get("pythons", ())),
        packages=packages,
        package_set=set_name,
        released=str(spec.get("released", "")),
        released_bound=bool(spec.get("released_bound", False)),
        cutoff=str(spec.get("cutoff", "")),
        source=str(spec.get("source", "")),
        dependency_metadata={pin: requires for pin, requires in metadata.items() if pin in packages},
        vertex_images_by_python=_vertex_images_by_python(spec),
    )


def _is_day(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return len(text) == 10


def _parse(raw: dict[str, Any], source: Path) -> Catalog:
    tiers = {}
    for name, spec in raw["scale_tiers"].items():
        roles = {
            role: RoleSpec(
                type=str(spec[role]["type"]),
                count=int(spec[role].get("count", 1)),
                accelerator=_accelerator(spec[role].get("accelerator")),
            )
            for role in ROLES
            if role in spec
        }
        tiers[name] = Tier(
            name=name,
            description=str(spec.get("description", "")),
            roles=roles,
            custom=bool(spec.get("custom", False)),
            verified=bool(spec.get("verified", True)),
            ml_units_per_hour=float(spec["ml_units_per_hour"]) if "ml_units_per_hour" in spec else None,
        )
    machines = {
        name: MachineType(
            name=name,
            family=str(spec["family"]),
            vcpus=int(spec.get("vcpus", 0)),
            memory_gb=float(spec.get("memory_gb", 0)),
            accelerator_family=spec.get("accelerator_family"),
            compute_engine=spec.get("compute_engine"),
            builtin_accelerator=_accelerator(spec.get("builtin_accelerator")),
            gpus=spec.get("gpus"),
            vertex_machine_type=spec.get("vertex_machine_type"),
            verified=bool(spec.get("verified", True)),
            selectable=bool(spec.get("selectable", True)),
        )
        for name, spec in raw["machine_types"].items()
    }
    attachment = {
        family: {
            accel: AttachmentRule(
                counts=tuple(int(c) for c in rule["counts"]),
                max_vcpus={int(k): int(v) for k, v in rule.get("max_vcpus", {}).items()},
                exact_per_machine=bool(rule.get("exact_per_machine", False)),
            )
            for accel, rule in rules.items()
        }
        for family, rules in raw["accelerator_attachment"].items()
        if isinstance(rules, dict)
    }
    fallback = str(raw.get("fallback_environment", ""))
    package_sets = {str(name): _package_set(name, spec) for name, spec in (raw.get("package_sets") or {}).items()}
    metadata = {str(pin): tuple(str(r) for r in requires) for pin, requires in
                (raw.get("dependency_metadata") or {}).items()}
    runtimes = {str(version): _runtime(str(version), spec, fallback, package_sets, metadata)
                for version, spec in raw["runtime_versions"].items()}
    environments = {
        str(name): EnvironmentRecipe(
            name=str(name),
            tensorflow=str(spec["tensorflow"]),
            packages=tuple(str(p) for p in spec["packages"]),
            reason=str(spec.get("reason", "")),
            pythons=tuple(str(p) for p in spec.get("pythons", ())),
            tf1_note=str(spec.get("tf1_note", "")),
            gpu_packages={str(k): str(v) for k, v in (spec.get("gpu_packages") or {}).items()},
        )
        for name, spec in (raw.get("environments") or {}).items()
    }
    for runtime in runtimes.values():
        if runtime.local_environment and runtime.local_environment not in environments:
            raise ValueError(f"runtime {runtime.version} names the unknown environment {runtime.local_environment!r}")
    prebuilt = raw.get("prebuilt") or {}
    return Catalog(
        prebuilt_images=_prebuilt_images(prebuilt, runtimes),
        prebuilt_registries=tuple(str(r) for r in prebuilt.get("registries") or ()),
        tiers=tiers,
        machine_types=machines,
        accelerators=dict(raw["accelerators"]),
        attachment=attachment,
        regions={name: tuple(spec.get("accelerators", [])) for name, spec in raw["regions"].items()},
        zones={name: str(spec["zone"]) for name, spec in raw["regions"].items() if spec.get("zone")},
        sources={str(key): " ".join(str(text).split()) for key, text in (raw.get("sources") or {}).items()},
        runtimes=runtimes,
        default_runtime_version=str(raw["default_runtime_version"]),
        environments=environments,
        limits=dict(raw["limits"]),
        source=source,
    )


def _read_yaml(path: Path) -> dict[str, Any]:
    # libyaml's loader when PyYAML has it: every supervisor and submit reads both files, and the
    # pure-Python loader takes most of the catalog's import-to-ready time.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a mapping")
    return data


@functools.cache
def load_catalog(path: Path | None = None) -> Catalog:
    source = path or catalog_path()
    try:
        raw = _read_yaml(source)
        if "runtime_versions" not in raw:  # a catalog may still carry its runtimes itself
            raw.update(_read_yaml(runtimes_path(source)))
        if "prebuilt" not in raw:
            raw["prebuilt"] = _read_yaml(prebuilt_images_path(source))
        return _parse(raw, source)
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as error:
        raise InternalError(f"the catalog {source} cannot be read: {error}") from error


# Vertex AI's pre-built training images name their Python in the tag (`tf-cpu.2-11.py310`);
# the older ones, without it, all run Python 3.7 (docs/runtime-versions.md).
_IMAGE_PYTHON = re.compile(r"\.py(\d)(\d+)(?::|$)")
UNTAGGED_IMAGE_PYTHON = "3.7"


def vertex_image_python(uri: str) -> str:
    """The Python a Vertex AI pre-built training image runs."""
    found = _IMAGE_PYTHON.search(uri)
    return f"{found.group(1)}.{found.group(2)}" if found else UNTAGGED_IMAGE_PYTHON


def _vertex_images_by_python(spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{python: {kind: image}} of a runtime's `vertex` images (`cpu`, `gpu`, `cpu-py310`, ...)."""
    found: dict[str, dict[str, str]] = {}
    for key, uri in (spec.get("vertex") or {}).items():
        found.setdefault(vertex_image_python(str(uri)), {})[str(key).split("-py", 1)[0]] = str(uri)
    return found
