"""The command line and the Python API accept and refuse the same submit values, with the same words.

One table of values, good and bad, for every kind of submit flag, goes through both front doors:
the real `aiptrain jobs submit training --dry-run` command, and `aiptrain.dry_run`. A value one
accepts the other accepts, and both make the same request of it; a value one refuses the other
refuses, exit 2 there and ValidationFailed here, naming the same problems with the same hints.
A row's Python side is the command line's text, or a Python value meaning the same thing.
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

import pytest
from click.testing import CliRunner

import aiptrain
from aiptrain._cli.main import report_error, root

# A remote package: no build, nothing staged, so each row costs only its validation and plan.
PACKAGE = "gs://aiptrain-test/trainer-0.1.tar.gz"
BASE_ARGS = ["--packages", PACKAGE, "--module-name", "trainer.task", "--region", "us-central1"]
BASE_KWARGS: dict[str, Any] = {"packages": [PACKAGE], "module_name": "trainer.task", "region": "us-central1"}
CUSTOM_ARGS = ["--scale-tier", "custom", "--master-machine-type", "n1-standard-4"]
CUSTOM_KWARGS = {"scale_tier": "custom", "master_machine_type": "n1-standard-4"}
KMS = "projects/p/locations/us/keyRings/ring/cryptoKeys/key"
T4 = "type=nvidia-tesla-t4,count=1"

# (row id, command-line flags, Python keyword arguments, None if accepted or the flag or field a problem names)
ROWS: list[tuple[str, list[str], dict[str, Any], str | None]] = [
    # scale tiers: gcloud's spelling, the API's, or between; the catalog's tiers only
    ("tier-gcloud", ["--scale-tier", "basic-gpu"], {"scale_tier": "basic-gpu"}, None),
    ("tier-api", ["--scale-tier", "BASIC_GPU"], {"scale_tier": "BASIC_GPU"}, None),
    ("tier-snake", ["--scale-tier", "basic_gpu"], {"scale_tier": "basic_gpu"}, None),
    ("tier-unknown", ["--scale-tier", "huge"], {"scale_tier": "huge"}, "--scale-tier"),
    # machine types, checked against the catalog with the job
    ("machine-known", CUSTOM_ARGS, CUSTOM_KWARGS, None),
    ("machine-unknown", ["--scale-tier", "custom", "--master-machine-type", "n1-huge-999"],
     {"scale_tier": "custom", "master_machine_type": "n1-huge-999"}, "trainingInput.masterType"),
    ("machine-without-custom", ["--master-machine-type", "n1-standard-4"], {"master_machine_type": "n1-standard-4"},
     "trainingInput.masterType"),
    # accelerators: KEY=VALUE text, in Python also a (type, count) pair
    ("accelerator-text", [*CUSTOM_ARGS, "--master-accelerator", T4], {**CUSTOM_KWARGS, "master_accelerator": T4},
     None),
    ("accelerator-pair", [*CUSTOM_ARGS, "--master-accelerator", T4],
     {**CUSTOM_KWARGS, "master_accelerator": ("nvidia-tesla-t4", 1)}, None),
    ("accelerator-api-spelling", [*CUSTOM_ARGS, "--master-accelerator", "type=NVIDIA_TESLA_T4,count=1"],
     {**CUSTOM_KWARGS, "master_accelerator": ("NVIDIA_TESLA_T4", 1)}, None),
    ("accelerator-unknown", [*CUSTOM_ARGS, "--master-accelerator", "type=nvidia-tesla-x1,count=1"],
     {**CUSTOM_KWARGS, "master_accelerator": ("nvidia-tesla-x1", 1)}, "--master-accelerator"),
    ("accelerator-zero", [*CUSTOM_ARGS, "--master-accelerator", "type=nvidia-tesla-t4,count=0"],
     {**CUSTOM_KWARGS, "master_accelerator": ("nvidia-tesla-t4", 0)}, "--master-accelerator"),
    ("accelerator-count-word", [*CUSTOM_ARGS, "--master-accelerator", "type=nvidia-tesla-t4,count=two"],
     {**CUSTOM_KWARGS, "master_accelerator": ("nvidia-tesla-t4", "two")}, "--master-accelerator"),
    ("accelerator-no-count", [*CUSTOM_ARGS, "--master-accelerator", "type=nvidia-tesla-t4"],
     {**CUSTOM_KWARGS, "master_accelerator": "type=nvidia-tesla-t4"}, "--master-accelerator"),
    ("accelerator-on-basic", ["--master-accelerator", T4], {"master_accelerator": T4},
     "trainingInput.masterConfig.acceleratorConfig"),
    # counts: a whole number >= 1, as text or (in Python) an int; with its machine type
    ("workers-text", [*CUSTOM_ARGS, "--worker-machine-type", "n1-standard-4", "--worker-count", "2"],
     {**CUSTOM_KWARGS, "worker_machine_type": "n1-standard-4", "worker_count": "2"}, None),
    ("workers-int", [*CUSTOM_ARGS, "--worker-machine-type", "n1-standard-4", "--worker-count", "2"],
     {**CUSTOM_KWARGS, "worker_machine_type": "n1-standard-4", "worker_count": 2}, None),
    ("workers-zero", [*CUSTOM_ARGS, "--worker-machine-type", "n1-standard-4", "--worker-count", "0"],
     {**CUSTOM_KWARGS, "worker_machine_type": "n1-standard-4", "worker_count": 0}, "--worker-count"),
    ("workers-word", [*CUSTOM_ARGS, "--worker-machine-type", "n1-standard-4", "--worker-count", "two"],
     {**CUSTOM_KWARGS, "worker_machine_type": "n1-standard-4", "worker_count": "two"}, "--worker-count"),
    ("workers-without-type", [*CUSTOM_ARGS, "--worker-count", "2"], {**CUSTOM_KWARGS, "worker_count": 2},
     "--worker-machine-type"),
    ("ps-without-count", [*CUSTOM_ARGS, "--parameter-server-machine-type", "n1-standard-4"],
     {**CUSTOM_KWARGS, "parameter_server_machine_type": "n1-standard-4"}, "--parameter-server-count"),
    # labels: KEY=VALUE,... (repeatable), in Python also a mapping
    ("labels-text", ["--labels", "team=ml,env=dev"], {"labels": "team=ml,env=dev"}, None),
    ("labels-repeated", ["--labels", "team=ml", "--labels", "env=dev"], {"labels": ["team=ml", "env=dev"]}, None),
    ("labels-mapping", ["--labels", "team=ml,env=dev"], {"labels": {"team": "ml", "env": "dev"}}, None),
    ("labels-no-value", ["--labels", "team"], {"labels": "team"}, "--labels"),
    ("labels-bad-key", ["--labels", "Team=ml"], {"labels": {"Team": "ml"}}, "labels"),
    # the trainer's arguments: after `--`, in Python `args`
    ("args", ["--", "--epochs", "3"], {"args": ["--epochs", "3"]}, None),
    ("args-empty", ["--"], {"args": []}, None),
    # true/false words, and a switch
    ("chief-yes", ["--use-chief-in-tf-config", "yes"], {"use_chief_in_tf_config": "yes"}, None),
    ("chief-bool", ["--use-chief-in-tf-config", "true"], {"use_chief_in_tf_config": True}, None),
    ("chief-maybe", ["--use-chief-in-tf-config", "maybe"], {"use_chief_in_tf_config": "maybe"},
     "--use-chief-in-tf-config"),
    ("web-access", ["--enable-web-access"], {"enable_web_access": True}, None),
    # where packages are staged: local or gcs
    ("storage-local", ["--storage", "local"], {"storage": "local"}, None),
    ("storage-unknown", ["--storage", "ftp"], {"storage": "ftp"}, "--storage"),
    # packages: comma-separated, in Python also a list
    ("packages-text", ["--packages", f"{PACKAGE},gs://aiptrain-test/extra-1.0.tar.gz"],
     {"packages": f"{PACKAGE},gs://aiptrain-test/extra-1.0.tar.gz"}, None),
    ("packages-list", ["--packages", f"{PACKAGE},gs://aiptrain-test/extra-1.0.tar.gz"],
     {"packages": [PACKAGE, "gs://aiptrain-test/extra-1.0.tar.gz"]}, None),
    # gs:// directories and buckets
    ("job-dir-bucket", ["--job-dir", "gs://aiptrain-out"], {"job_dir": "gs://aiptrain-out"}, None),
    ("job-dir-local", ["--job-dir", "/tmp/out"], {"job_dir": "/tmp/out"}, "trainingInput.jobDir"),
    ("staging-not-gs", ["--staging-bucket", "my-bucket"], {"staging_bucket": "my-bucket"}, "--staging-bucket"),
    # KMS keys: a full name, or a short one with its parts
    ("kms-full", ["--kms-key", KMS], {"kms_key": KMS}, None),
    ("kms-short", ["--kms-key", "key", "--kms-keyring", "ring", "--kms-location", "us", "--kms-project", "p"],
     {"kms_key": "key", "kms_keyring": "ring", "kms_location": "us", "kms_project": "p"}, None),
    ("kms-short-alone", ["--kms-key", "key"], {"kms_key": "key"}, "--kms-key"),
    ("kms-parts-alone", ["--kms-keyring", "ring", "--kms-location", "us"],
     {"kms_keyring": "ring", "kms_location": "us"}, "--kms-key"),
    # versions, images, accounts: text checked with the job
    ("runtime", ["--runtime-version", "2.11", "--python-version", "3.7"],
     {"runtime_version": "2.11", "python_version": "3.7"}, None),
    ("runtime-and-image", ["--runtime-version", "2.11", "--master-image-uri", "gcr.io/p/trainer:1"],
     {"runtime_version": "2.11", "master_image_uri": "gcr.io/p/trainer:1"}, "--runtime-version"),
    ("service-account-bad", ["--service-account", "nobody"], {"service_account": "nobody"},
     "trainingInput.serviceAccount"),
]

def command_line(job_id: str, flags: list[str]) -> tuple[int, dict[str, Any] | None, str]:
    """The real command's exit code, its dry-run document (if it printed one) and its stderr."""
    split = flags.index("--") if "--" in flags else len(flags)  # the trainer's arguments stay last
    result = CliRunner().invoke(root, ["jobs", "submit", "training", job_id, *BASE_ARGS, *flags[:split], "--dry-run",
                                       "--format", "json", *flags[split:]], catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else None, result.stderr


def python_api(job_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """`aiptrain.dry_run`'s document, or what the command line prints of the ValidationFailed it raised."""
    try:
        return aiptrain.dry_run(job_id, **{**BASE_KWARGS, **kwargs}), ""
    except aiptrain.ValidationFailed as refused:
        printed = io.StringIO()
        with contextlib.redirect_stderr(printed):
            report_error(refused)
        return None, printed.getvalue()


@pytest.mark.parametrize(("flags", "kwargs", "named"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_both_doors_accept_and_refuse_alike(flags: list[str], kwargs: dict[str, Any], named: str | None) -> None:
    code, printed, stderr = command_line("same_job", flags)
    document, refusal = python_api("same_job", kwargs)
    if named is None:
        assert code == 0, stderr
        assert document is not None and printed is not None
        for key in ("request", "cluster", "tfConfig", "vertex", "uploads"):
            assert printed[key] == document[key], key
    else:
        assert code == 2 and document is None
        assert refusal == stderr
        assert f"  - {named}" in refusal


def test_a_value_only_python_can_write_is_refused_naming_the_flag() -> None:
    document, refusal = python_api("same_job", {"runtime_version": 2.11})  # the command line's "2.11" is text
    assert document is None
    assert "  - --runtime-version: 2.11 is not text\n    hint: pass --runtime-version as a string\n" in refusal
