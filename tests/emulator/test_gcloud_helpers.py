"""The emulator's small helpers for gcloud: its configuration file, project numbers, ML units."""

from __future__ import annotations

import configparser
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from aiptrain._cli.main import root
from aiptrain._emulator.gcloud_config import render_configuration, write_configuration
from aiptrain._emulator.ml_units import consumed_ml_units
from aiptrain._emulator.projects import ProjectDirectory, project_number_for
from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import Job
from aiptrain.errors import UsageError


def parsed(text: str) -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    config.read_string(text)
    return config


def test_configuration_points_every_api_at_the_emulator(tmp_path: Path) -> None:
    path = write_configuration("ci-emulator", "http://127.0.0.1:8123", project="p1", region="europe-west4",
                               storage_endpoint="http://127.0.0.1:4443/", config_dir=tmp_path)
    assert path == tmp_path / "configurations" / "config_ci-emulator"
    config = parsed(path.read_text())
    overrides = dict(config["api_endpoint_overrides"])
    assert overrides == {"ml": "http://127.0.0.1:8123/", "aiplatform": "http://127.0.0.1:8123/",
                         "logging": "http://127.0.0.1:8123/", "storage": "http://127.0.0.1:4443/storage/v1/"}
    assert config["core"]["project"] == "p1" and config["auth"]["disable_credentials"] == "true"
    assert config["compute"]["region"] == config["ai"]["region"] == "europe-west4"
    assert config["core"]["disable_usage_reporting"] == "true"
    assert config["component_manager"]["disable_update_check"] == "true"


def test_without_a_storage_emulator_storage_goes_to_the_emulator_too() -> None:
    # Never to storage.googleapis.com: the emulator answers 404 instead.
    config = parsed(render_configuration("http://127.0.0.1:9/", project="p", region="r", storage_endpoint=None))
    assert config["api_endpoint_overrides"]["storage"] == "http://127.0.0.1:9/storage/v1/"


@pytest.mark.parametrize("name", ["Upper", "1st", "with_underscore", "none", ""])
def test_bad_configuration_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError):
        write_configuration(name, "http://127.0.0.1:1/", project="p", region="r", storage_endpoint=None,
                            config_dir=tmp_path)
    assert not (tmp_path / "configurations").exists()


def test_serve_refuses_a_bad_name_before_listening(tmp_path: Path) -> None:
    result = CliRunner().invoke(root, ["local", "serve", "--port", "0", "--gcloud-config", "Bad Name"],
                                catch_exceptions=False)
    assert result.exit_code == 2
    assert "invalid gcloud configuration name" in result.stderr


def test_project_numbers_are_stable_and_lead_back(tmp_path: Path) -> None:
    number = project_number_for("my-project")
    assert number == project_number_for("my-project") and len(number) == 12 and number.isdigit()
    assert number != project_number_for("my-project-2")
    directory = ProjectDirectory(tmp_path / "projects.json")
    assert directory.project_id(number) == number  # not seen yet: a project of its own
    assert directory.number("my-project") == number
    # Another server on the same state directory (a restart) resolves it too.
    assert ProjectDirectory(tmp_path / "projects.json").project_id(number) == "my-project"
    assert directory.project_id("my-project") == "my-project"


def job(tier: str, start: str | None, end: str | None, **training_input: object) -> Job:
    return Job.model_validate({"jobId": "j", "startTime": start, "endTime": end,
                               "trainingInput": {"scaleTier": tier, "region": "us-central1", **training_input}})


def test_consumed_ml_units() -> None:
    catalog = load_catalog()
    basic_rate = catalog.tiers["BASIC"].ml_units_per_hour
    assert basic_rate
    two_hours = job("BASIC", "2024-01-01T00:00:00Z", "2024-01-01T02:00:00Z")
    assert consumed_ml_units(two_hours, catalog) == round(2 * basic_rate, 2)
    assert consumed_ml_units(job("BASIC", None, None), catalog) is None
    running = job("BASIC", "2024-01-01T00:00:00Z", None)
    assert consumed_ml_units(running, catalog, now=datetime(2024, 1, 1, 1, tzinfo=UTC)) == round(basic_rate, 2)
    # CUSTOM: by replica, in multiples of BASIC's n1-standard-4 (n1-standard-8 counts twice).
    custom = job("CUSTOM", "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z", masterType="n1-standard-8",
                 workerType="n1-standard-4", workerCount="2")
    assert consumed_ml_units(custom, catalog) == round(4 * basic_rate, 2)
