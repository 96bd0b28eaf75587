"""gcloud's configuration is read as gcloud reads it: the real `gcloud` and aiptrain look at the same
throw-away CLOUDSDK_CONFIG and must agree on the project, the regions and the endpoint overrides.
Then the command line: the configuration fills in what no flag or variable gives.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiptrain._cli.gcloud_properties import PROPERTIES, read_properties
from aiptrain.errors import UsageError

GCLOUD = shutil.which("gcloud")
WORK = ("[core]\nproject = p-work\n[compute]\nregion = europe-west4\n[ai_platform]\nregion = asia-east1\n"
        "[api_endpoint_overrides]\nml = http://127.0.0.1:9/\naiplatform = http://127.0.0.1:10/\n")
DEFAULT = "[core]\nproject = p-default\n[ai_platform]\nregion = us-east1\n"


@pytest.fixture
def cloudsdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cloudsdk"
    (directory / "configurations").mkdir(parents=True)
    (directory / "configurations" / "config_work").write_text(WORK)
    (directory / "configurations" / "config_default").write_text(DEFAULT)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(directory))
    for name in list(os.environ):
        if name.startswith("CLOUDSDK_") and name != "CLOUDSDK_CONFIG":
            monkeypatch.delenv(name)
    return directory


def gcloud_value(prop: str, *flags: str) -> str | None:
    assert GCLOUD is not None
    env = {**os.environ, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    done = subprocess.run([GCLOUD, *flags, "config", "get-value", prop], capture_output=True, text=True,
                          timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() or None


def gcloud_activate(name: str) -> None:
    assert GCLOUD is not None
    subprocess.run([GCLOUD, "config", "configurations", "activate", name], check=True, capture_output=True,
                   timeout=60, env={**os.environ, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"})


def assert_same_as_gcloud(*flags: str, configuration: str | None = None) -> dict[str, str | None]:
    ours = read_properties(configuration)
    theirs = {prop: gcloud_value(prop, *flags) for prop in PROPERTIES}
    assert {prop: ours.get(prop) for prop in PROPERTIES} == theirs
    return theirs


@pytest.mark.skipif(GCLOUD is None, reason="the gcloud CLI is not installed")
def test_aiptrain_reads_what_gcloud_reads(cloudsdk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No active_config file: gcloud has not set the directory up; its first run makes the `default`
    # configuration out of the old `properties` file (replacing config_default).
    (cloudsdk / "properties").write_text("[core]\nproject = p-legacy\n")
    assert assert_same_as_gcloud()["core/project"] == "p-legacy"
    assert (cloudsdk / "active_config").read_text() == "default"
    (cloudsdk / "configurations" / "config_default").write_text(DEFAULT)
    assert assert_same_as_gcloud()["core/project"] == "p-default"
    # The active_config file, written by gcloud itself.
    gcloud_activate("work")
    values = assert_same_as_gcloud()
    assert values["compute/region"] == "europe-west4" and values["api_endpoint_overrides/ml"] == "http://127.0.0.1:9/"
    # --configuration wins over the file.
    assert assert_same_as_gcloud("--configuration", "default", configuration="default")["core/project"] == "p-default"
    # CLOUDSDK_ACTIVE_CONFIG_NAME wins over the file too.
    monkeypatch.setenv("CLOUDSDK_ACTIVE_CONFIG_NAME", "default")
    assert assert_same_as_gcloud()["ai_platform/region"] == "us-east1"
    monkeypatch.delenv("CLOUDSDK_ACTIVE_CONFIG_NAME")
    # A property's variable wins over the file.
    monkeypatch.setenv("CLOUDSDK_CORE_PROJECT", "p-env")
    monkeypatch.setenv("CLOUDSDK_COMPUTE_REGION", "us-west1")
    values = assert_same_as_gcloud()
    assert (values["core/project"], values["compute/region"]) == ("p-env", "us-west1")


def test_a_configuration_named_but_missing_is_refused(cloudsdk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match=r"--configuration: the gcloud configuration \[nope\] does not exist"):
        read_properties("nope")
    monkeypatch.setenv("CLOUDSDK_ACTIVE_CONFIG_NAME", "nope")
    with pytest.raises(UsageError, match="CLOUDSDK_ACTIVE_CONFIG_NAME"):
        read_properties()
    with pytest.raises(UsageError, match="not a gcloud configuration name"):
        read_properties("Bad Name")


def aiptrain(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aiptrain", *argv], capture_output=True, text=True, timeout=240,
                          env={**os.environ, **(env or {})})


def test_the_command_line_uses_the_configuration_under_flags_and_variables(cloudsdk: Path, trainer: Path) -> None:
    (cloudsdk / "active_config").write_text("work")
    submitted = aiptrain("jobs", "submit", "training", "from_config", "--package-path", str(trainer),
                         "--module-name", "trainer.task", "--dry-run", "--format",
                         "value(project,request.trainingInput.region)")
    assert (submitted.returncode, submitted.stdout) == (0, "p-work\teurope-west4\n"), submitted.stderr
    flagged = aiptrain("jobs", "submit", "training", "from_config", "--package-path", str(trainer),
                       "--module-name", "trainer.task", "--dry-run", "--region", "us-central1", "--format",
                       "value(project,request.trainingInput.region)", env={"AIPTRAIN_PROJECT": "p-variable"})
    assert flagged.stdout == "p-variable\tus-central1\n"
    other = aiptrain("--configuration", "default", "jobs", "submit", "training", "from_config", "--package-path",
                     str(trainer), "--module-name", "trainer.task", "--dry-run", "--format",
                     "value(project,request.trainingInput.region)")
    assert other.stdout == "p-default\tus-east1\n"
    missing = aiptrain("jobs", "list", "--configuration", "nope")
    assert (missing.returncode, missing.stdout) == (2, "")
    assert "error: --configuration: the gcloud configuration [nope] does not exist" in missing.stderr
    # The ml endpoint override is where --backend mlv1 goes (nothing listens on port 9: refused).
    unreachable = aiptrain("jobs", "list", "--backend", "mlv1")
    assert unreachable.returncode == 1
    assert "127.0.0.1:9" in unreachable.stderr
