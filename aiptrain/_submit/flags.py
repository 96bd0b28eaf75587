"""The flags of `jobs submit training` that describe the job: one table, flag -> REST field -> help.

The CLI builds its click options from this table (`cli/jobs.py`), `flag_values` turns the values
of the command line or the Python API into `SubmitOptions` with it, `submission.merge_job` puts
each value at its field, and the submit path knows which job field a flag problem already covers.
`SubmitOptions` has one attribute per entry (`dest`); a test holds the two together. Adding a flag
that sets a job field is one entry here and one attribute there.

Flags about the command rather than the job (--stream-logs, --dry-run, --storage, ...) are
declared by the command itself.

Below the table, the parsers of gcloud's value syntaxes (`flag_values` holds the one parser per
`Kind` that calls them); each returns a value or adds a problem naming the flag. Problems are
collected, not raised one by one, so a command line with several mistakes is reported in one go
with the problems found in the job itself. Scale tiers and accelerators are the catalog's
(scale_tiers.yaml), never listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from aiptrain.errors import ProblemList

if TYPE_CHECKING:
    from aiptrain._job.catalog import Catalog

TRUE_WORDS = {"true": True, "yes": True, "false": False, "no": False}


class Kind(Enum):
    """How a flag's text becomes a `SubmitOptions` value, and that value a REST value."""

    TEXT = "text"  # the string as given
    PATH = "path"  # a local path (pathlib.Path)
    COUNT = "count"  # a whole number >= 1, sent as an int64 string
    SCALE_TIER = "scale_tier"  # basic-gpu -> BASIC_GPU
    ACCELERATOR = "accelerator"  # type=nvidia-tesla-t4,count=1 -> {"type": ..., "count": "1"}
    BOOL_WORD = "bool_word"  # true/yes/false/no
    SWITCH = "switch"  # a bare flag; True when given, otherwise not set
    LABELS = "labels"  # KEY=VALUE,... repeatable; merged into the config's labels
    PACKAGES = "packages"  # comma-separated files or gs:// URIs
    GS_DIR = "gs_dir"  # gs://bucket becomes gs://bucket/, as the service stored it
    KMS_KEY = "kms_key"  # a full key name, or a short one completed from --kms-keyring/...
    KMS_PART = "kms_part"  # --kms-keyring/--kms-location/--kms-project: only complete --kms-key


@dataclass(frozen=True)
class SubmitFlag:
    flag: str
    help: str
    # Where merge_job puts the value, under trainingInput ("masterConfig.imageUri"); None: the
    # submit path uses the value itself (--package-path, --config, --labels, ...).
    field: str | None = None
    kind: Kind = Kind.TEXT
    # The SubmitOptions attribute, when it is not the flag's name in snake case.
    attribute: str | None = None

    @property
    def dest(self) -> str:
        return self.attribute or self.flag.removeprefix("--").replace("-", "_")


SUBMIT_FLAGS: tuple[SubmitFlag, ...] = (
    SubmitFlag("--package-path", "Directory of the trainer package (with __init__.py); its parent is built "
               "with setuptools.", kind=Kind.PATH),
    SubmitFlag("--packages", "Comma-separated local package files or gs:// URIs to install too.",
               kind=Kind.PACKAGES),
    SubmitFlag("--module-name", "Module to run, e.g. trainer.task.", "pythonModule"),
    SubmitFlag("--staging-bucket", "gs://BUCKET for uploaded packages (default: the --job-dir bucket)."),
    SubmitFlag("--job-dir", "gs:// directory for outputs; passed to the trainer as --job-dir.", "jobDir",
               Kind.GS_DIR),
    SubmitFlag("--config", "YAML/JSON Job (trainingInput...); flags win over it.", kind=Kind.PATH,
               attribute="config_path"),
    SubmitFlag("--scale-tier", "Scale tier, e.g. basic, standard-1 or custom (the catalog's tiers; an unknown one "
               "is refused with the list).", "scaleTier", Kind.SCALE_TIER),
    SubmitFlag("--runtime-version", "AI Platform runtime version, e.g. 2.11.", "runtimeVersion"),
    SubmitFlag("--python-version", "Python version of the runtime, e.g. 3.7.", "pythonVersion"),
    SubmitFlag("--master-machine-type", "Machine type of the master (CUSTOM tier).", "masterType"),
    SubmitFlag("--master-accelerator", "type=nvidia-tesla-t4,count=1", "masterConfig.acceleratorConfig",
               Kind.ACCELERATOR),
    SubmitFlag("--master-image-uri", "Custom container image of the master.", "masterConfig.imageUri"),
    SubmitFlag("--worker-machine-type", "Machine type of the workers (with --worker-count).", "workerType"),
    SubmitFlag("--worker-count", "Number of workers (with --worker-machine-type).", "workerCount", Kind.COUNT),
    SubmitFlag("--worker-accelerator", "type=...,count=... for each worker.", "workerConfig.acceleratorConfig",
               Kind.ACCELERATOR),
    SubmitFlag("--worker-image-uri", "Custom container image of the workers.", "workerConfig.imageUri"),
    SubmitFlag("--parameter-server-machine-type", "Machine type of the parameter servers.",
               "parameterServerType"),
    SubmitFlag("--parameter-server-count", "Number of parameter servers.", "parameterServerCount", Kind.COUNT),
    SubmitFlag("--parameter-server-accelerator", "type=...,count=... for each parameter server.",
               "parameterServerConfig.acceleratorConfig", Kind.ACCELERATOR),
    SubmitFlag("--parameter-server-image-uri", "Custom container image of the parameter servers.",
               "parameterServerConfig.imageUri"),
    SubmitFlag("--use-chief-in-tf-config",
               "true/false: name a custom container's primary `chief` in TF_CONFIG (no effect on a runtime version).",
               "useChiefInTfConfig", Kind.BOOL_WORD),
    SubmitFlag("--labels", "KEY=VALUE,... labels (merged into the config's).", kind=Kind.LABELS),
    SubmitFlag("--service-account", "Service account email the job runs as.", "serviceAccount"),
    SubmitFlag("--kms-key", "Cloud KMS key (full name, or short with --kms-keyring/--kms-location).",
               "encryptionConfig.kmsKeyName", Kind.KMS_KEY),
    SubmitFlag("--kms-keyring", "Key ring of a short --kms-key.", kind=Kind.KMS_PART),
    SubmitFlag("--kms-location", "Location of a short --kms-key.", kind=Kind.KMS_PART),
    SubmitFlag("--kms-project", "Project of a short --kms-key (default: --project).", kind=Kind.KMS_PART),
    SubmitFlag("--enable-web-access", "Enable interactive shell access.", "enableWebAccess", Kind.SWITCH),
)

# The flags whose values become SubmitOptions attributes (--kms-keyring & co. only complete --kms-key).
OPTION_FLAGS = tuple(flag for flag in SUBMIT_FLAGS if flag.kind is not Kind.KMS_PART)


# gcloud's rule: a machine type flag and its count flag come together (machine type first).
PAIRED_FLAGS = (
    ("--worker-machine-type", "--worker-count"),
    ("--parameter-server-machine-type", "--parameter-server-count"),
)

FLAGS_BY_NAME = {entry.flag: entry for entry in SUBMIT_FLAGS}


def flag_field(flag: str) -> str | None:
    """The job field (`trainingInput.workerCount`) a flag sets; None if it sets none."""
    entry = FLAGS_BY_NAME.get(flag)
    return None if entry is None or entry.field is None else f"trainingInput.{entry.field}"


def flag_spelling(name: str) -> str:
    """A catalog name as gcloud's flags spell it: BASIC_GPU -> basic-gpu."""
    return name.replace("_", "-").lower()


def parse_scale_tier(value: str | None, out: ProblemList, catalog: Catalog) -> str | None:
    """`basic-gpu`, `BASIC_GPU` and `basic_gpu` all mean BASIC_GPU; the tiers are the catalog's."""
    if value is None:
        return None
    tier = flag_spelling(value).replace("-", "_").upper()
    if tier not in catalog.tiers:
        choices = ", ".join(sorted(flag_spelling(name) for name in catalog.tiers))
        out.add("--scale-tier", f"{value!r} is not a scale tier", f"use one of: {choices}")
        return None
    return tier


def parse_accelerator(flag: str, value: str | None, out: ProblemList, catalog: Catalog) -> tuple[str, int] | None:
    """`type=nvidia-tesla-t4,count=2` -> ("NVIDIA_TESLA_T4", 2); both keys are required."""
    if value is None:
        return None
    parts: dict[str, str] = {}
    for item in value.split(","):
        key, sep, val = item.partition("=")
        if not sep:
            out.add(flag, f"{item!r} is not KEY=VALUE", "write type=nvidia-tesla-t4,count=1")
            return None
        parts[key.strip()] = val.strip()
    unknown = set(parts) - {"type", "count"}
    if unknown:
        out.add(flag, f"unknown key(s) {', '.join(sorted(unknown))}", "only type= and count= are accepted")
        return None
    missing = [key for key in ("type", "count") if key not in parts]
    if missing:
        out.add(flag, f"key [{missing[0]}] is required", "write type=nvidia-tesla-t4,count=1")
        return None
    return check_accelerator(flag, parts["type"], parts["count"], out, catalog)


def check_accelerator(flag: str, type_name: str, count_text: str, out: ProblemList,
                      catalog: Catalog) -> tuple[str, int] | None:
    """An accelerator's type (either spelling) and count, however they were written, as the catalog knows them."""
    accelerator = flag_spelling(type_name).replace("-", "_").upper()
    if accelerator not in catalog.accelerators:
        choices = ", ".join(sorted(flag_spelling(name) for name in catalog.accelerators))
        out.add(flag, f"invalid accelerator {type_name!r}", f"valid choices: {choices}")
        return None
    try:
        count = int(count_text)
    except ValueError:
        out.add(flag, f"count {count_text!r} is not a whole number", f"write {flag} type={type_name},count=1")
        return None
    if count <= 0:
        out.add(flag, "the count of the accelerator must be greater than 0",
                f"write {flag} type={type_name},count=1, or leave {flag} out")
        return None
    return accelerator, count


def parse_bool_word(flag: str, value: str | None, out: ProblemList) -> bool | None:
    if value is None:
        return None
    word = TRUE_WORDS.get(value.lower())
    if word is None:
        out.add(flag, f"invalid value {value!r}", "expected one of: true, yes, false, no")
    return word


def parse_labels(values: tuple[str, ...], out: ProblemList, *, flag: str = "--labels") -> dict[str, str] | None:
    """--labels k=v,k2=v2 (repeatable); later keys win."""
    if not values:
        return None
    labels: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            if not item:
                continue
            key, sep, val = item.partition("=")
            if not sep:
                out.add(flag, f"{item!r} is not KEY=VALUE", f"write {flag} team=ml,env=dev")
                continue
            labels[key] = val
    return labels


def parse_packages(value: str | None) -> list[str] | None:
    """--packages a.tar.gz,gs://b/c.whl; like gcloud, a repeated flag keeps the last value."""
    if value is None:
        return None
    return [item for item in (part.strip() for part in value.split(",")) if item]


def parse_count(flag: str, value: int | None, out: ProblemList) -> int | None:
    if value is not None and value < 1:
        out.add(flag, f"must be at least 1, got {value}", f"pass {flag} 1 or more, or leave {flag} out")
        return None
    return value


def kms_key_name(key: str | None, keyring: str | None, location: str | None, project: str | None,
                 out: ProblemList) -> str | None:
    """A full key name, or a short one completed from --kms-keyring/--kms-location/--kms-project."""
    if key is None:
        if keyring or location:
            out.add("--kms-key", "--kms-keyring/--kms-location need --kms-key",
                    "add --kms-key KEY_NAME, or drop --kms-keyring and --kms-location")
        return None
    if key.startswith("projects/"):
        return key
    if not (keyring and location and project):
        out.add("--kms-key", "encryption key not fully specified",
                "give the full name projects/P/locations/L/keyRings/K/cryptoKeys/N, or add --kms-keyring,"
                " --kms-location and --kms-project")
        return None
    return f"projects/{project}/locations/{location}/keyRings/{keyring}/cryptoKeys/{key}"


def group_pair(out: ProblemList, type_flag: str, type_value: str | None, count_flag: str,
               count_value: int | None) -> None:
    """gcloud's rule: a machine type flag and its count flag come together."""
    if (type_value is None) != (count_value is None):
        missing = count_flag if count_value is None else type_flag
        given = type_flag if count_value is None else count_flag
        out.add(missing, f"required when {given} is given", f"pass both {type_flag} and {count_flag}")
