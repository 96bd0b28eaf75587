"""The flags of `jobs submit training` that describe the job: one table, flag -> REST field -> help.

The CLI builds its click options and reads their values from this table (`cli/jobs.py`),
`submission.merge_job` puts each value at its field, and the submit path knows which job field a
flag problem already covers. `SubmitOptions` has one attribute per entry (`dest`); a test holds
the two together. Adding a flag that sets a job field is one entry here and one attribute there.

Flags about the command rather than the job (--stream-logs, --dry-run, --storage, ...) are
declared by the command itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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
    SubmitFlag("--scale-tier", "basic, basic-gpu, basic-tpu, custom, premium-1, standard-1.", "scaleTier",
               Kind.SCALE_TIER),
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
    SubmitFlag("--use-chief-in-tf-config", "true/false: name the primary `chief` in TF_CONFIG.",
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
