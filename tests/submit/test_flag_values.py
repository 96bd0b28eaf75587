"""From flag values to SubmitOptions: the command line's text and the Python API's values alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._submit.flag_values import PARSERS, build_submit_options, parse_storage
from aiptrain._submit.flags import Kind
from aiptrain._submit.submission import Accelerator
from aiptrain.errors import ProblemList


def build(values: dict[str, Any], project: str | None = "my-project") -> tuple[Any, list[str]]:
    options, problems = build_submit_options("j", values, catalog=load_catalog(), project=project)
    return options, [problem.render() for problem in problems]


def test_every_kind_has_its_parser() -> None:
    assert set(PARSERS) == set(Kind)


@pytest.mark.parametrize(("values", "attribute", "expected"), [
    ({"scale_tier": "basic-gpu"}, "scale_tier", "BASIC_GPU"),
    ({"scale_tier": "BASIC_GPU"}, "scale_tier", "BASIC_GPU"),
    ({"worker_machine_type": "n1-standard-4", "worker_count": "3"}, "worker_count", 3),
    ({"worker_machine_type": "n1-standard-4", "worker_count": 3}, "worker_count", 3),
    ({"master_accelerator": "type=nvidia-tesla-t4,count=2"}, "master_accelerator", Accelerator("NVIDIA_TESLA_T4", 2)),
    ({"master_accelerator": ("nvidia-tesla-t4", 2)}, "master_accelerator", Accelerator("NVIDIA_TESLA_T4", 2)),
    ({"master_accelerator": ["NVIDIA_TESLA_T4", "2"]}, "master_accelerator", Accelerator("NVIDIA_TESLA_T4", 2)),
    ({"master_accelerator": Accelerator("nvidia-tesla-t4", 2)}, "master_accelerator",
     Accelerator("NVIDIA_TESLA_T4", 2)),
    ({"use_chief_in_tf_config": "No"}, "use_chief_in_tf_config", False),
    ({"use_chief_in_tf_config": True}, "use_chief_in_tf_config", True),
    ({"enable_web_access": True}, "enable_web_access", True),
    ({"labels": ("a=1,b=2", "a=3")}, "labels", {"a": "3", "b": "2"}),
    ({"labels": {"a": "1"}}, "labels", {"a": "1"}),
    ({"labels": ()}, "labels", None),  # the command line's --labels, not given
    ({"packages": "a.tar.gz, gs://b/c.whl"}, "packages", ["a.tar.gz", "gs://b/c.whl"]),
    ({"packages": ("a.tar.gz",)}, "packages", ["a.tar.gz"]),
    ({"package_path": "trainer"}, "package_path", Path("trainer")),
    ({"config_path": Path("job.yaml")}, "config_path", Path("job.yaml")),
    ({"kms_key": "k", "kms_keyring": "r", "kms_location": "us"}, "kms_key",
     "projects/my-project/locations/us/keyRings/r/cryptoKeys/k"),
    ({"kms_key": "k", "kms_keyring": "r", "kms_location": "us", "kms_project": "other"}, "kms_key",
     "projects/other/locations/us/keyRings/r/cryptoKeys/k"),
])
def test_text_and_python_values_become_the_same_options(values: dict[str, Any], attribute: str,
                                                        expected: Any) -> None:
    options, problems = build(values)
    assert problems == []
    assert getattr(options, attribute) == expected


@pytest.mark.parametrize(("values", "expected"), [
    ({"worker_machine_type": "n1-standard-4", "worker_count": True},
     "--worker-count: True is not a whole number (pass --worker-count 1 or more, or leave --worker-count out)"),
    ({"worker_machine_type": "n1-standard-4", "worker_count": "2.5"},
     "--worker-count: '2.5' is not a whole number (pass --worker-count 1 or more, or leave --worker-count out)"),
    ({"runtime_version": 2.11}, "--runtime-version: 2.11 is not text (pass --runtime-version as a string)"),
    ({"scale_tier": 1}, "--scale-tier: 1 is not text (pass --scale-tier as a string)"),
    ({"package_path": 3}, "--package-path: 3 is not a path (pass --package-path as a path or a string)"),
    ({"enable_web_access": "yes"}, "--enable-web-access: 'yes' is not true or false "
                                   "(pass --enable-web-access=True, or leave --enable-web-access out)"),
    ({"labels": 5}, "--labels: 5 is not labels (pass --labels team=ml,env=dev (in Python also {'team': 'ml'}))"),
    ({"packages": [1]}, "--packages: [1] is not a list of packages "
                        "(pass --packages dist/a.tar.gz,gs://b/c.whl (in Python also a list))"),
    ({"master_accelerator": ("nvidia-tesla-t4",)}, "--master-accelerator: ('nvidia-tesla-t4',) is not an "
     "accelerator (pass type=nvidia-tesla-t4,count=1 (in Python also ('nvidia-tesla-t4', 1)))"),
    ({"master_accelerator": ("nvidia-tesla-t4", 0)}, "--master-accelerator: the count of the accelerator must be "
     "greater than 0 (write --master-accelerator type=nvidia-tesla-t4,count=1, or leave --master-accelerator out)"),
    ({"kms_key": "k", "kms_keyring": "r", "kms_location": 7}, "--kms-location: 7 is not text "
                                                               "(pass --kms-location as a string)"),
])
def test_a_value_of_the_wrong_form_is_refused_naming_its_flag(values: dict[str, Any], expected: str) -> None:
    _, problems = build(values)
    assert expected in problems


def test_every_problem_of_a_command_line_is_collected_in_order() -> None:
    _, problems = build({"worker_count": "0", "scale_tier": "huge", "use_chief_in_tf_config": "maybe",
                         "master_image_uri": "gcr.io/p/i", "runtime_version": "2.11"})
    assert [problem.split(":")[0] for problem in problems] == [
        "--worker-machine-type", "--runtime-version", "--scale-tier", "--worker-count", "--use-chief-in-tf-config"]


def test_a_short_kms_key_without_a_project_is_not_completed() -> None:
    options, problems = build({"kms_key": "k", "kms_keyring": "r", "kms_location": "us"}, project=None)
    assert options.kms_key is None
    assert [problem.split(":")[0] for problem in problems] == ["--kms-key"]


@pytest.mark.parametrize("value", [None, "local", "gcs"])
def test_storage_is_local_or_gcs(value: str | None) -> None:
    out = ProblemList()
    assert parse_storage(value, out) == value
    assert out.problems == []


def test_another_storage_is_refused_with_the_choices() -> None:
    out = ProblemList()
    assert parse_storage("GCS", out) is None
    (problem,) = out.problems
    assert (problem.path, problem.hint) == ("--storage", "use one of: local, gcs")
