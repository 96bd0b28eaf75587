"""Cross-field rules for a Job, checked before anything is built or uploaded.

`validate_job` returns every problem it finds (never raises on the first), each with the REST
path of the field, what is wrong and how to fix it. The rules are the service's server-side
checks plus gcloud's flag checks, applied to the merged job whatever its source.
"""

from __future__ import annotations

import difflib
import itertools
import math
import re
import unicodedata
from collections.abc import Iterable

from aiptrain._job import era
from aiptrain._job.catalog import Catalog, MachineType, Runtime
from aiptrain._job.limits import args_problems, object_name_problem
from aiptrain._job.spec import (
    ROLES,
    Algorithm,
    HyperparameterSpec,
    Job,
    ParameterSpec,
    ParameterType,
    ReplicaConfig,
    Role,
    ScaleTier,
    ScaleType,
    Scheduling,
    TrainingInput,
)
from aiptrain.errors import Problem

# The service's job-ID rule (its length limit is the catalog's job_id_max_length). `\Z`, not `$`:
# `$` also matches before a trailing newline, and "job\n" is no job ID.
JOB_ID_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")
BUCKET_CHARS = re.compile(r"^[a-z0-9_.-]+\Z")
IP_LIKE = re.compile(r"^\d+\.\d+\.\d+\.\d+\Z")
# Cloud Storage reserves "google" and look-alikes such as "g00gle" or "gogle" anywhere in a name.
GOOGLE_LIKE = re.compile(r"g[o0]+g[l1]e")
DURATION = re.compile(r"^(\d+)(\.\d+)?s\Z")
SERVICE_ACCOUNT = re.compile(r"^(.+@.+\..+|[0-9]+)\Z")
KMS_KEY = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+\Z")
NETWORK = re.compile(r"^projects/[^/]+/global/networks/[^/]+\Z")
# An image reference as Docker's and Podman's reference grammar (distribution/reference) reads it:
# [DOMAIN[:PORT]/]PATH[:TAG][@DIGEST], the path in lowercase. Anything else (`--help`, a space, a
# shell word) would reach the engine's command line as something other than an image.
_IMAGE_HOST_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IMAGE_DOMAIN = rf"{_IMAGE_HOST_PART}(?:\.{_IMAGE_HOST_PART})*(?::[0-9]+)?"
_IMAGE_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_IMAGE_DOMAIN}/)?{_IMAGE_PATH_PART}(?:/{_IMAGE_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?\Z")
IMAGE_NAME_MAX = 255
GRID_TYPES = {ParameterType.INTEGER, ParameterType.CATEGORICAL, ParameterType.DISCRETE}
LOG_SCALES = {ScaleType.UNIT_LOG_SCALE, ScaleType.UNIT_REVERSE_LOG_SCALE}


def suggest_job_id(job_id: str, max_length: int) -> str:
    """A valid ID close to `job_id`: `my-job-1` -> `my_job_1`, `1job` -> `job_1job`."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", job_id) or "job"
    if not cleaned[0].isalpha():
        cleaned = f"job_{cleaned}"
    return cleaned[:max_length]


def check_job_id(job_id: str | None, catalog: Catalog) -> list[Problem]:
    """The job-ID rule every submit path and the emulator apply."""
    max_length = int(catalog.limits["job_id_max_length"])
    if not job_id:
        return [Problem("jobId", "a job ID is required", "pass it as the JOB argument, e.g. my_job_1")]
    if len(job_id) > max_length:
        return [Problem("jobId", f"is {len(job_id)} characters long; at most {max_length} are allowed",
                        f"shorten it, e.g. {suggest_job_id(job_id, max_length)}")]
    if not JOB_ID_PATTERN.match(job_id):
        return [Problem("jobId", f"{job_id!r} must start with a letter and contain only letters, "
                        "digits and underscores", f"use {suggest_job_id(job_id, max_length)}")]
    return []


def bucket_name_problem(bucket: str) -> str | None:
    """Why `bucket` is not a valid GCS bucket name, or None (gcloud's rules, in its order)."""
    parts = bucket.split(".")
    if not 3 <= len(bucket) <= 222 or any(len(p) > 63 for p in parts) or (
        len(parts) == 1 and len(bucket) > 63
    ):
        return ("bucket names must have 3 to 63 characters (up to 222 with dots, "
                "each dot-separated part at most 63)")
    if not BUCKET_CHARS.match(bucket):
        return "bucket names may contain only lowercase letters, digits, '-', '_' and '.'"
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        return "bucket names must start and end with a letter or digit"
    if IP_LIKE.match(bucket):
        return "bucket names must not look like an IP address"
    if bucket.startswith("goog"):
        return "bucket names must not start with 'goog' (reserved by Google)"
    if GOOGLE_LIKE.search(bucket):
        return "bucket names must not contain 'google' or a look-alike such as 'g00gle'"
    return None


def _bucket_hint(bucket: str) -> str:
    """A concrete rename for the reserved-word rules; the naming guide for the others."""
    guide = "see https://cloud.google.com/storage/docs/buckets#naming"
    if not (bucket.startswith("goog") or GOOGLE_LIKE.search(bucket)):
        return guide
    renamed = GOOGLE_LIKE.sub("gcp", bucket)
    if renamed.startswith("goog"):
        renamed = f"my-{renamed}"
    if bucket_name_problem(renamed) is not None:
        return f"pick a name without 'goog' at the start or 'google' inside; {guide}"
    return f"use a bucket without the reserved word, e.g. gs://{renamed}"


def check_gs_uri(path: str, uri: str | None, *, bucket_only: bool = False,
                 need_object: bool = False) -> list[Problem]:
    """A gs:// URI with a valid bucket name; `bucket_only` forbids an object part."""
    if uri is None:
        return []
    example = "gs://my-bucket" if bucket_only else "gs://my-bucket/path"
    if not uri.startswith("gs://"):
        return [Problem(path, f"{uri!r} is not a Cloud Storage URI", f"write it as {example}")]
    bucket, _, name = uri[5:].partition("/")
    reason = bucket_name_problem(bucket)
    if reason:
        return [Problem(path, f"invalid bucket name {bucket!r}: {reason}", _bucket_hint(bucket))]
    if bucket_only and name.strip("/"):
        return [Problem(path, f"{uri!r} must name only a bucket", f"use gs://{bucket}")]
    object_problem = object_name_problem(uri)
    if object_problem:
        return [Problem(path, f"{uri!r}: {object_problem}", f"write it as gs://{bucket}/dir/file")]
    if need_object and not name.strip("/"):
        return [Problem(path, f"{uri!r} names no object", f"write it as gs://{bucket}/FILE")]
    return []


def _label_char_ok(char: str, *, first: bool) -> bool:
    category = unicodedata.category(char)
    if category in ("Ll", "Lo"):
        return True
    return not first and (category.startswith("N") or char in "_-")


def check_labels(labels: dict[str, str] | None, catalog: Catalog) -> list[Problem]:
    if not labels:
        return []
    problems: list[Problem] = []
    limit_key = int(catalog.limits["label_key_max_length"])
    limit_value = int(catalog.limits["label_value_max_length"])
    if len(labels) > int(catalog.limits["max_labels"]):
        limit = int(catalog.limits["max_labels"])
        problems.append(Problem("labels", f"{len(labels)} labels; at most {limit}",
                                f"remove {len(labels) - limit} of them"))
    for key, value in labels.items():
        path = f"labels.{key}"
        key_ok = (0 < len(key) <= limit_key and _label_char_ok(key[0], first=True)
                  and all(_label_char_ok(c, first=False) for c in key[1:]))
        if not key_ok:
            problems.append(Problem(path, f"invalid label key {key!r}",
                                    "keys start with a lowercase letter and hold only lowercase letters, "
                                    f"digits, '_' and '-', at most {limit_key} characters"))
        value_ok = len(value) <= limit_value and all(_label_char_ok(c, first=False) for c in value)
        if not value_ok:
            problems.append(Problem(path, f"invalid label value {value!r}",
                                    "values hold only lowercase letters, digits, '_' and '-', "
                                    f"at most {limit_value} characters"))
        elif key == era.LABEL and (why := era.day_problem(value)):
            problems.append(Problem(path, f"{why}: it moves the day the job's packages resolve as of",
                                    f"use e.g. {era.LABEL}=2021-06-30, or {era.LABEL}=today"))
    return problems


def _closest(value: str, choices: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return found[0] if found else None


def check_region(region: str | None, catalog: Catalog) -> list[Problem]:
    if not region:
        return [Problem("trainingInput.region", "a region is required",
                        "pass --region us-central1 (or set AIPTRAIN_REGION)")]
    if region not in catalog.regions:
        close = _closest(region, catalog.regions)
        hint = f"did you mean {close}?" if close else "regions: " + ", ".join(sorted(catalog.regions))
        return [Problem("trainingInput.region", f"{region!r} is not a training region", hint)]
    return []


def _role_values(ti: TrainingInput, role: Role) -> tuple[str | None, ReplicaConfig | None, int | None]:
    return role.machine_type(ti), role.config(ti), None if role.count_field is None else role.count(ti)


def _check_accelerator(path: str, machine: MachineType | None, accel_type: str | None, count: int,
                       region: str | None, catalog: Catalog) -> list[Problem]:
    problems: list[Problem] = []
    if accel_type is None or accel_type == "ACCELERATOR_TYPE_UNSPECIFIED":
        return [Problem(f"{path}.type", "an accelerator needs a type",
                        "e.g. acceleratorConfig: {type: NVIDIA_TESLA_T4, count: 1}")]
    if count <= 0:
        problems.append(Problem(f"{path}.count", "the accelerator count must be greater than 0",
                                "set count: 1 (or more), or drop the acceleratorConfig"))
    if machine is not None:
        if machine.family == "legacy":
            problems.append(Problem(path, f"legacy machine type {machine.name!r} takes no acceleratorConfig",
                                    f"use a Compute Engine type such as {machine.compute_engine}, "
                                    "or a legacy GPU type like standard_gpu"))
        else:
            rules = catalog.attachment.get(machine.accelerator_family or "", {})
            rule = rules.get(accel_type)
            if rule is None:
                accepted = ", ".join(rules) or "none"
                problems.append(Problem(path, f"{machine.name} cannot take {accel_type}",
                                        f"accelerators for this machine family: {accepted}"))
            elif count > 0:
                if count not in rule.counts:
                    problems.append(Problem(f"{path}.count", f"{accel_type} comes in counts of "
                                            f"{', '.join(map(str, rule.counts))}, not {count}",
                                            f"use count {_nearest_count(count, rule.counts)}"))
                elif rule.exact_per_machine and machine.gpus not in (None, count):
                    problems.append(Problem(f"{path}.count", f"{machine.name} has exactly {machine.gpus} "
                                            f"{accel_type}", f"set count: {machine.gpus}"))
                elif count in rule.max_vcpus and machine.vcpus > rule.max_vcpus[count]:
                    ceiling = rule.max_vcpus[count]
                    problems.append(Problem(path, f"{count} x {accel_type} supports at most {ceiling} "
                                            f"vCPUs; {machine.name} has {machine.vcpus}",
                                            "pick a smaller machine type or more accelerators"))
    problems.extend(_check_region_accelerator(path, accel_type, region, catalog))
    return problems


def _nearest_count(count: int, allowed: Iterable[int]) -> int:
    """The smallest allowed count that still covers `count`, else the largest there is."""
    choices = sorted(allowed)
    return next((c for c in choices if c >= count), choices[-1])


def _check_region_accelerator(path: str, accel_type: str, region: str | None,
                              catalog: Catalog) -> list[Problem]:
    if region and region in catalog.regions and accel_type not in catalog.regions[region]:
        offering = sorted(r for r, accels in catalog.regions.items() if accel_type in accels)
        hint = ("regions with it: " + ", ".join(offering)) if offering else "no training region offers it"
        return [Problem(path, f"{accel_type} is not available in {region}", hint)]
    return []


_ACCELERATOR_FLAGS = {"master": ("--master-accelerator", "--master-machine-type"),
                      "worker": ("--worker-accelerator", "--worker-machine-type"),
                      "parameter_server": ("--parameter-server-accelerator", "--parameter-server-machine-type")}


def _accelerator_needs_custom(tier: ScaleTier, role: Role) -> Problem:
    flag, machine_flag = _ACCELERATOR_FLAGS.get(role.name, (f"{role.config_field}.acceleratorConfig",
                                                            f"{role.type_field} in --config"))
    return Problem(f"trainingInput.{role.config_field}.acceleratorConfig",
                   f"scale tier {tier.value} takes no accelerators ({flag})",
                   f"use --scale-tier custom with {machine_flag} (e.g. n1-standard-8) to attach accelerators, "
                   f"or leave {flag} out")


def check_scale_tier(ti: TrainingInput, catalog: Catalog) -> list[Problem]:
    problems: list[Problem] = []
    tier = ti.scale_tier or ScaleTier.BASIC
    custom = tier == ScaleTier.CUSTOM
    families: dict[str, str] = {}
    for spec_role in ROLES:
        role, type_field, config_field, count_field = (spec_role.name, spec_role.type_field,
                                                       spec_role.config_field, spec_role.count_field)
        machine_name, config, count = _role_values(ti, spec_role)
        type_path = f"trainingInput.{type_field}"
        if not custom:
            if machine_name is not None:
                problems.append(Problem(type_path, f"scale tier {tier.value} takes no machine types",
                                        "set scaleTier: CUSTOM (--scale-tier custom) to choose machines"))
            if count_field and count:
                problems.append(Problem(f"trainingInput.{count_field}",
                                        f"scale tier {tier.value} takes no replica counts",
                                        "set scaleTier: CUSTOM (--scale-tier custom) to choose counts"))
            if config is not None and config.accelerator_config is not None:
                # The service refused these; dropping them would run the job without its GPUs.
                problems.append(_accelerator_needs_custom(tier, spec_role))
            continue
        if role == "master" and not machine_name:
            problems.append(Problem(type_path, "scale tier CUSTOM needs a master machine type",
                                    "pass --master-machine-type n1-standard-4 (or set masterType)"))
        if count_field and count is not None and count < 0:
            problems.append(Problem(f"trainingInput.{count_field}", "must not be negative",
                                    f"set {count_field} to 0 or more, or leave it out"))
        if count_field and count and count > 0 and not machine_name:
            flag = {"worker": "--worker-machine-type", "parameter_server": "--parameter-server-machine-type",
                    "evaluator": f"{type_field} in --config"}[role]
            problems.append(Problem(type_path, f"{count_field} is {count} but no {type_field} is set",
                                    f"set {flag}"))
        machine = None
        if machine_name:
            machine = catalog.machine_types.get(machine_name)
            if machine is None:
                problems.append(Problem(type_path, f"unknown machine type {machine_name!r}",
                                        _machine_type_hint(machine_name, catalog)))
            elif not machine.selectable:
                problems.append(_not_selectable(type_path, machine, catalog))
            elif machine.family in ("legacy", "compute_engine"):
                families[type_field] = machine.family
        accel = config.accelerator_config if config else None
        if accel is not None:
            accel_path = f"trainingInput.{config_field}.acceleratorConfig"
            accel_type = accel.type.value if accel.type else None
            problems.extend(_check_accelerator(accel_path, machine, accel_type, int(accel.count or 0),
                                               ti.region, catalog))
        elif machine is not None and machine.builtin_accelerator is not None:
            problems.extend(_check_region_accelerator(type_path, machine.builtin_accelerator.type,
                                                      ti.region, catalog))
    if len(set(families.values())) > 1:
        legacy = [f for f, fam in families.items() if fam == "legacy"]
        problems.append(Problem("trainingInput", "legacy and Compute Engine machine types are mixed "
                                f"({', '.join(sorted(families))})",
                                f"use Compute Engine types for {', '.join(legacy)} too"))
    if not custom and tier.value in catalog.tiers:
        for role_spec in catalog.tiers[tier.value].roles.values():
            if role_spec.accelerator is not None:
                problems.extend(_check_region_accelerator("trainingInput.scaleTier",
                                                          role_spec.accelerator.type, ti.region, catalog))
    return problems


def _not_selectable(path: str, machine: MachineType, catalog: Catalog) -> Problem:
    """A type the catalog knows (a tier is made of it) that a job could not name: the same family's
    next larger type, and one of the same size."""
    same_family = [m for m in catalog.machine_types.values() if m.selectable and m.family == machine.family]
    series = machine.name.rsplit("-", 1)[0]
    larger = sorted((m for m in same_family if m.name.rsplit("-", 1)[0] == series and m.vcpus > machine.vcpus),
                    key=lambda m: m.vcpus)
    same_size = [m for m in same_family if m.vcpus == machine.vcpus]
    choices = [m.name for m in [*larger[:1], *same_size[:1]]]
    return Problem(path, f"{machine.name} is not a machine type AI Platform Training accepted in a job (the "
                   "catalog keeps it for a scale tier's replicas)",
                   f"use {' or '.join(choices)}" if choices else _machine_type_hint(machine.name, catalog))


def _machine_type_hint(name: str, catalog: Catalog) -> str:
    """Name real machine types: the nearest spellings, or a few common ones when none is near."""
    selectable = [m for m in catalog.machine_types if catalog.machine_types[m].selectable]
    close = difflib.get_close_matches(name, selectable, n=3, cutoff=0.5)
    if close:
        others = f" (or {', '.join(close[1:])})" if close[1:] else ""
        return f"did you mean {close[0]}?{others}"
    examples = [m.name for m in catalog.machine_types.values() if m.family == "compute_engine" and m.selectable][:3]
    return f"use a machine type such as {', '.join(examples)}; all are listed in scale_tiers.yaml"


def runtime_warnings(ti: TrainingInput | None, catalog: Catalog) -> list[str]:
    """What a job is told about its runtime at submit: a retired runtime, or none named (the
    service's default ran). Nothing for a custom container, which brings its own."""
    if ti is None or (ti.master_config is not None and ti.master_config.image_uri):
        return []
    runtime = catalog.runtime_for(ti.runtime_version)
    if runtime is None:
        return []
    return runtime.warnings(named=ti.runtime_version is not None, python_named=ti.python_version is not None)


def _unsupported_python(runtime: Runtime, python: str, catalog: Catalog) -> Problem:
    """A Python the runtime never had (2.7 on 2.1 and later), refused as the service refused it."""
    had_it = [version for version, other in catalog.runtimes.items() if python in other.python]
    hint = f"use --python-version {runtime.python[-1]}"
    if had_it:
        span = had_it[0] if len(had_it) == 1 else f"{had_it[0]} to {had_it[-1]}"
        hint += f", or a runtime version that had Python {python} ({span})"
    return Problem("trainingInput.pythonVersion",
                   f"runtime {runtime.version} does not support Python {python}; AI Platform Training refused "
                   f"such a job: \"The specified runtime version '{runtime.version}' with the Python version "
                   f"'{python}' is not supported or is deprecated.\"", hint)


def check_runtime(ti: TrainingInput, catalog: Catalog) -> list[Problem]:
    problems: list[Problem] = []
    image = ti.master_config.image_uri if ti.master_config else None
    if image and ti.runtime_version:
        problems.append(Problem("trainingInput.runtimeVersion",
                                "runtimeVersion and masterConfig.imageUri cannot both be set",
                                "a custom container brings its own runtime: drop --runtime-version"))
    if image and ti.python_version:
        problems.append(Problem("trainingInput.pythonVersion",
                                "pythonVersion does not apply to a custom container",
                                "drop --python-version"))
    if ti.runtime_version:
        runtime = catalog.runtime_for(ti.runtime_version)
        if runtime is None:
            problems.append(_unknown_runtime(ti.runtime_version, catalog))
        elif ti.python_version and ti.python_version not in runtime.python:
            problems.append(_unsupported_python(runtime, ti.python_version, catalog))
    elif ti.python_version and not image:
        supported = sorted(v for v, r in catalog.runtimes.items() if ti.python_version in r.python)
        if not supported:
            known = sorted({v for r in catalog.runtimes.values() for v in r.python})
            problems.append(Problem("trainingInput.pythonVersion",
                                    f"no runtime version supports Python {ti.python_version}",
                                    f"use one of {', '.join(known)}, or leave --python-version out"))
        else:
            problems.append(Problem("trainingInput.pythonVersion",
                                    "pythonVersion needs a runtimeVersion",
                                    f"add --runtime-version {supported[-1]}"))
    return problems


def _unknown_runtime(version: str, catalog: Catalog) -> Problem:
    """An unknown version, with its numeric neighbours for an `x.y` (1.3 is between 1.2 and 1.4, not
    near 1.13), else the nearest spelling."""
    listed = "runtime versions: " + ", ".join(catalog.runtimes)
    wanted = _version_key(version)
    if wanted is not None:
        known = sorted((key, v) for v in catalog.runtimes if (key := _version_key(v)) is not None)
        below = [v for key, v in known if key < wanted and key[0] == wanted[0]]
        above = [v for key, v in known if key > wanted and key[0] == wanted[0]]
        near = [*below[-1:], *above[:1]]
        if near:
            return Problem("trainingInput.runtimeVersion", f"unknown runtime version {version!r}",
                           f"did you mean {' or '.join(near)}? ({listed})")
    close = _closest(version, catalog.runtimes)
    return Problem("trainingInput.runtimeVersion", f"unknown runtime version {version!r}",
                   f"did you mean {close}? ({listed})" if close else listed)


def _version_key(version: str) -> tuple[int, int] | None:
    major, dot, minor = version.partition(".")
    return (int(major), int(minor)) if dot and major.isdigit() and minor.isdigit() else None


def check_package_count(uris: list[str], catalog: Catalog) -> list[Problem]:
    """The service's limit on packageUris."""
    limit = int(catalog.limits["max_package_uris"])
    if len(uris) > limit:
        return [Problem("trainingInput.packageUris", f"{len(uris)} packages; at most {limit}",
                        "combine dependencies into fewer packages")]
    return []


def check_program(ti: TrainingInput, catalog: Catalog, *, require_packages: bool) -> list[Problem]:
    """What runs: a Python package and module, or a custom container, not a mixture."""
    problems: list[Problem] = []
    configs = [(role.config_field, role.config(ti)) for role in ROLES]
    image = ti.master_config.image_uri if ti.master_config else None
    for name, config in configs:
        if config is None:
            continue
        if config.image_uri is not None:
            problems.extend(image_reference_problems(f"trainingInput.{name}.imageUri", config.image_uri))
        has_container_args = config.container_command is not None or config.container_args is not None
        if has_container_args and ti.args is not None:
            problems.append(Problem(f"trainingInput.{name}",
                                    "containerCommand/containerArgs cannot be combined with args",
                                    "put the arguments in containerArgs, or drop the container fields"))
        if has_container_args and not (config.image_uri or image):
            problems.append(Problem(f"trainingInput.{name}", "containerCommand/containerArgs need a custom "
                                    "container image", "set masterConfig.imageUri (--master-image-uri)"))
    uris = ti.package_uris or []
    problems.extend(check_package_count(uris, catalog))
    if not image:
        if not ti.python_module:
            problems.append(Problem("trainingInput.pythonModule", "a Python module to run is required",
                                    "pass --module-name trainer.task"))
        if require_packages and not uris:
            problems.append(Problem("trainingInput.packageUris", "no trainer package to run",
                                    "pass --package-path trainer/ or --packages dist/trainer.tar.gz"))
    for index, uri in enumerate(uris):
        problems.extend(check_gs_uri(f"trainingInput.packageUris[{index}]", uri, need_object=True))
    for arg_index, message in args_problems(ti.args):
        where = "trainingInput.args" if arg_index is None else f"trainingInput.args[{arg_index}]"
        problems.append(Problem(where, message, "pass large inputs as files (e.g. a gs:// path), not arguments"))
    return problems


def image_reference_problems(field: str, image: str) -> list[Problem]:
    """An image URI that is not an image reference (`--help`, `My Image`, `img:`) is refused here:
    the engine would read it as an option or fail to parse it when the job starts."""
    without_digest = image.split("@", 1)[0]
    last = without_digest.rsplit("/", 1)[-1]
    name = without_digest[: len(without_digest) - len(last)] + last.split(":", 1)[0]  # no tag (a port stays)
    if IMAGE_REFERENCE.match(image) and len(name) <= IMAGE_NAME_MAX:
        return []
    return [Problem(field, f"{image[:100]!r} is not an image reference",
                    "name an image as REPOSITORY[:TAG] or REPOSITORY@sha256:DIGEST, e.g. "
                    "gcr.io/my-project/trainer:latest (lowercase repository, no spaces, not starting with -)")]


def _duration_seconds(value: str) -> float | None:
    match = DURATION.match(value)
    return float(value[:-1]) if match else None


def check_scheduling(scheduling: Scheduling | None, catalog: Catalog) -> list[Problem]:
    if scheduling is None:
        return []
    problems: list[Problem] = []
    base = "trainingInput.scheduling"
    if scheduling.max_running_time is not None:
        seconds = _duration_seconds(scheduling.max_running_time)
        if seconds is None or seconds <= 0:
            problems.append(Problem(f"{base}.maxRunningTime",
                                    f"{scheduling.max_running_time!r} is not a positive duration",
                                    'write seconds with an "s", e.g. "7200s"'))
    if scheduling.max_wait_time is not None:
        seconds = _duration_seconds(scheduling.max_wait_time)
        minimum = int(catalog.limits["scheduling_min_max_wait_seconds"])
        if seconds is None:
            problems.append(Problem(f"{base}.maxWaitTime", f"{scheduling.max_wait_time!r} is not a duration",
                                    'write seconds with an "s", e.g. "3600s"'))
        elif seconds < minimum:
            problems.append(Problem(f"{base}.maxWaitTime", f"must be at least {minimum}s",
                                    f'e.g. "{minimum}s"'))
    if scheduling.priority is not None:
        low, high = catalog.limits["scheduling_priority"]
        if not low <= scheduling.priority <= high:
            nearest = min(max(scheduling.priority, low), high)
            problems.append(Problem(f"{base}.priority", f"must be between {low} and {high}",
                                    f"use priority: {nearest}"))
    return problems


def _check_parameter(path: str, param: ParameterSpec, algorithm: Algorithm | None,
                     catalog: Catalog) -> list[Problem]:
    problems: list[Problem] = []
    kind = param.type
    if kind is None or kind == ParameterType.PARAMETER_TYPE_UNSPECIFIED:
        return [Problem(f"{path}.type", "a parameter type is required",
                        "use DOUBLE, INTEGER, CATEGORICAL or DISCRETE")]
    log_scale = param.scale_type in LOG_SCALES
    if kind in (ParameterType.DOUBLE, ParameterType.INTEGER):
        if param.min_value is None or param.max_value is None:
            problems.append(Problem(path, f"{kind.value} parameters need minValue and maxValue",
                                    "add both, e.g. minValue: 1, maxValue: 10"))
        else:
            if param.min_value >= param.max_value:
                problems.append(Problem(f"{path}.minValue", "minValue must be below maxValue",
                                        _range_hint(param.min_value, param.max_value)))
            if kind == ParameterType.INTEGER and not (
                float(param.min_value).is_integer() and float(param.max_value).is_integer()
            ):
                problems.append(Problem(path, "INTEGER bounds must be whole numbers",
                                        f"use minValue: {math.ceil(param.min_value)}, maxValue: "
                                        f"{math.floor(param.max_value)}, or type DOUBLE"))
            if log_scale and param.min_value <= 0:
                problems.append(Problem(f"{path}.minValue", "a log scale needs a strictly positive range",
                                        "raise minValue above 0 or use UNIT_LINEAR_SCALE"))
    if kind == ParameterType.CATEGORICAL:
        if not param.categorical_values:
            problems.append(Problem(f"{path}.categoricalValues", "CATEGORICAL parameters need values",
                                    "list them, e.g. categoricalValues: [adam, sgd]"))
        elif len(set(param.categorical_values)) != len(param.categorical_values):
            repeated = sorted({v for v in param.categorical_values if param.categorical_values.count(v) > 1})
            problems.append(Problem(f"{path}.categoricalValues", "values must be unique",
                                    f"list {', '.join(map(repr, repeated))} once"))
        if param.min_value is not None or param.max_value is not None:
            problems.append(Problem(path, "CATEGORICAL parameters take no minValue/maxValue",
                                    "remove minValue and maxValue, or use type DOUBLE or INTEGER for a range"))
        if param.scale_type not in (None, ScaleType.NONE):
            problems.append(Problem(f"{path}.scaleType", "CATEGORICAL parameters take no scale type",
                                    "remove scaleType"))
    if kind == ParameterType.DISCRETE:
        values = param.discrete_values or []
        if not values:
            problems.append(Problem(f"{path}.discreteValues", "DISCRETE parameters need values",
                                    "list them in increasing order, e.g. discreteValues: [16, 32, 64]"))
        elif any(b <= a for a, b in itertools.pairwise(values)):
            fixed = ", ".join(f"{v:g}" for v in sorted(set(values)))
            problems.append(Problem(f"{path}.discreteValues", "values must be strictly increasing",
                                    f"sort them and drop repeats: discreteValues: [{fixed}]"))
        if len(values) > int(catalog.limits["discrete_values_max"]):
            problems.append(Problem(f"{path}.discreteValues",
                                    f"at most {catalog.limits['discrete_values_max']} values",
                                    "keep fewer values, or search a range with type DOUBLE or INTEGER"))
        if log_scale and values and values[0] <= 0:
            problems.append(Problem(f"{path}.discreteValues", "a log scale needs strictly positive values",
                                    "drop the values <= 0, or use UNIT_LINEAR_SCALE"))
    if algorithm == Algorithm.GRID_SEARCH and kind not in GRID_TYPES:
        problems.append(Problem(f"{path}.type", f"GRID_SEARCH cannot search a {kind.value} parameter",
                                "use INTEGER, CATEGORICAL or DISCRETE, or another algorithm"))
    return problems


def _range_hint(low: float, high: float) -> str:
    if low > high:
        return f"swap them: minValue: {high:g}, maxValue: {low:g}"
    return f"widen the range: raise maxValue above {low:g}"


def check_hyperparameters(spec: HyperparameterSpec | None, catalog: Catalog) -> list[Problem]:
    if spec is None:
        return []
    base = "trainingInput.hyperparameters"
    problems: list[Problem] = []
    params = spec.params or []
    if not params:
        problems.append(Problem(f"{base}.params", "at least one parameter is required",
                                "add one, e.g. params: [{parameterName: learning_rate, type: DOUBLE, "
                                "minValue: 0.0001, maxValue: 0.1}]"))
    seen: set[str] = set()
    for index, param in enumerate(params):
        path = f"{base}.params[{index}]"
        name = param.parameter_name
        if not name:
            problems.append(Problem(f"{path}.parameterName", "a parameter name is required",
                                    "set parameterName to the flag your trainer reads, e.g. learning_rate"))
        elif name in seen:
            problems.append(Problem(f"{path}.parameterName", f"duplicate parameter name {name!r}",
                                    f"rename it or remove one of the parameters named {name!r}"))
        else:
            seen.add(name)
        problems.extend(_check_parameter(path, param, spec.algorithm, catalog))
    max_trials = spec.max_trials if spec.max_trials is not None else 1
    parallel = spec.max_parallel_trials if spec.max_parallel_trials is not None else 1
    if max_trials < 1:
        problems.append(Problem(f"{base}.maxTrials", "must be at least 1", "set maxTrials: 1 or more"))
    if parallel < 1:
        problems.append(Problem(f"{base}.maxParallelTrials", "must be at least 1",
                                "set maxParallelTrials: 1 or more"))
    elif parallel > max_trials:
        problems.append(Problem(f"{base}.maxParallelTrials",
                                f"is {parallel}, more than maxTrials ({max_trials})",
                                f"set maxParallelTrials to at most {max_trials}"))
    if spec.max_failed_trials is not None and spec.max_failed_trials < 0:
        problems.append(Problem(f"{base}.maxFailedTrials", "must not be negative",
                                "set maxFailedTrials: 0 or more, or leave it out"))
    if spec.resume_previous_job_id is not None:
        problems.extend(Problem(f"{base}.resumePreviousJobId", p.message, p.hint)
                        for p in check_job_id(spec.resume_previous_job_id, catalog))
    return problems


def check_identity(ti: TrainingInput) -> list[Problem]:
    problems: list[Problem] = []
    if ti.service_account is not None and not SERVICE_ACCOUNT.match(ti.service_account):
        problems.append(Problem("trainingInput.serviceAccount", f"{ti.service_account!r} is not a service "
                                "account", "use an email like trainer@PROJECT.iam.gserviceaccount.com"))
    kms = ti.encryption_config.kms_key_name if ti.encryption_config else None
    if kms is not None and not KMS_KEY.match(kms):
        problems.append(Problem("trainingInput.encryptionConfig.kmsKeyName", f"{kms!r} is not a key name",
                                "use projects/P/locations/L/keyRings/K/cryptoKeys/N"))
    if ti.network is not None and not NETWORK.match(ti.network):
        problems.append(Problem("trainingInput.network", f"{ti.network!r} is not a network name",
                                "use projects/PROJECT_NUMBER/global/networks/NAME"))
    return problems


def validate_job(job: Job, catalog: Catalog, *, require_packages: bool = True) -> list[Problem]:
    """Every problem with `job`, in field order; [] when it may be submitted."""
    problems = check_job_id(job.job_id, catalog)
    problems += check_labels(job.labels, catalog)
    ti = job.training_input
    if ti is None:
        return [*problems, Problem("trainingInput", "a trainingInput is required",
                                   "add trainingInput: {region: us-central1, pythonModule: trainer.task}")]
    problems += check_region(ti.region, catalog)
    problems += check_gs_uri("trainingInput.jobDir", ti.job_dir)
    problems += check_scale_tier(ti, catalog)
    problems += check_runtime(ti, catalog)
    problems += check_program(ti, catalog, require_packages=require_packages)
    problems += check_scheduling(ti.scheduling, catalog)
    problems += check_hyperparameters(ti.hyperparameters, catalog)
    problems += check_identity(ti)
    return problems
