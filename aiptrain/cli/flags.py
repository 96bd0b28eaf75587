"""Parsers for gcloud's flag value syntaxes; each returns a value or a Problem naming the flag.

Flag problems are collected, not raised one by one, so a command line with several mistakes is
reported in one go together with the problems found in the job itself.
"""

from __future__ import annotations

from aiptrain.errors import ProblemList

SCALE_TIERS = ("basic", "basic-gpu", "basic-tpu", "custom", "premium-1", "standard-1")
ACCELERATORS = (
    "nvidia-tesla-a100", "nvidia-tesla-k80", "nvidia-tesla-p100", "nvidia-tesla-p4", "nvidia-tesla-t4",
    "nvidia-tesla-v100", "tpu-v2", "tpu-v2-pod", "tpu-v3", "tpu-v3-pod", "tpu-v4-pod",
)
TRUE_WORDS = {"true": True, "yes": True, "false": False, "no": False}


def parse_scale_tier(value: str | None, out: ProblemList) -> str | None:
    """`basic-gpu`, `BASIC_GPU` and `basic_gpu` all mean BASIC_GPU."""
    if value is None:
        return None
    normalised = value.replace("_", "-").lower()
    if normalised not in SCALE_TIERS:
        out.add("--scale-tier", f"{value!r} is not a scale tier", f"use one of: {', '.join(SCALE_TIERS)}")
        return None
    return normalised.replace("-", "_").upper()


def parse_accelerator(flag: str, value: str | None, out: ProblemList) -> tuple[str, int] | None:
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
    accel = parts["type"].replace("_", "-").lower()
    if accel not in ACCELERATORS:
        out.add(flag, f"invalid accelerator {parts['type']!r}", f"valid choices: {', '.join(ACCELERATORS)}")
        return None
    try:
        count = int(parts["count"])
    except ValueError:
        out.add(flag, f"count {parts['count']!r} is not a whole number",
                f"write {flag} type={parts['type']},count=1")
        return None
    if count <= 0:
        out.add(flag, "the count of the accelerator must be greater than 0",
                f"write {flag} type={parts['type']},count=1, or leave {flag} out")
        return None
    return accel.replace("-", "_").upper(), count


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
