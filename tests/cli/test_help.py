"""`aiptrain --help` is fast because it imports no google library, no TensorFlow, no Ray, no pydantic model."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from aiptrain._cli.main import root

FORBIDDEN = ("googleapiclient", "google.cloud.storage", "google.auth", "tensorflow", "pydantic", "uvicorn",
             "starlette", "optuna", "aiptrain._job.spec", "ray.")

PROBE = """
import sys
from aiptrain._cli.main import root
try:
    root.main(args={args!r}, prog_name="aiptrain")
except SystemExit:
    pass
print("\\n".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("args", [["--help"], ["jobs", "submit", "training", "--help"], ["jobs", "--help"],
                                  ["local", "train", "--help"]])
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    output = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True,
                            check=True).stdout
    loaded = set(output.split())
    assert "click" in loaded  # the probe really ran the command
    heavy = sorted(name for name in loaded if name.startswith(FORBIDDEN))
    assert heavy == []


def test_help_lists_commands_and_exit_codes() -> None:
    result = CliRunner().invoke(root, ["--help"])
    assert result.exit_code == 0
    for word in ("jobs", "local", "init", "Exit codes", "130"):
        assert word in result.output


def test_submit_help_lists_gcloud_flags() -> None:
    result = CliRunner().invoke(root, ["jobs", "submit", "training", "--help"])
    assert result.exit_code == 0
    for flag in ("--package-path", "--packages", "--module-name", "--staging-bucket", "--job-dir", "--region",
                 "--config", "--scale-tier", "--runtime-version", "--python-version", "--master-machine-type",
                 "--master-accelerator", "--master-image-uri", "--worker-machine-type", "--worker-count",
                 "--worker-accelerator", "--worker-image-uri", "--parameter-server-machine-type",
                 "--parameter-server-count", "--parameter-server-accelerator", "--parameter-server-image-uri",
                 "--use-chief-in-tf-config", "--labels", "--service-account", "--kms-key", "--enable-web-access",
                 "--stream-logs", "--async", "--backend", "--project", "--format", "--dry-run"):
        assert flag in result.output, flag
