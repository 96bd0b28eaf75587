"""The runtime and scale-tier catalogs say where each value comes from, and hold what the sources say."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import TrainingInput, parse_job
from aiptrain._job.validate import runtime_warnings, validate_job

CATALOG = load_catalog()
_SOURCE_KEY = re.compile(r"\b(RNA|RN|VX|GC|API-old|API-new|TF2|ERR|VERSIONING|PR24|PyPI|R-img)\b")


def test_every_runtime_has_a_day_twelve_months_after_its_release_and_a_source() -> None:
    for runtime in CATALOG.runtimes.values():
        released = datetime.date.fromisoformat(runtime.released)
        cutoff = datetime.date.fromisoformat(runtime.cutoff)
        assert cutoff == released.replace(year=released.year + 1), runtime.version  # supported 12 months
        keys = set(_SOURCE_KEY.findall(runtime.source))
        assert keys and keys <= set(CATALOG.sources), (runtime.version, runtime.source)
        if runtime.released_bound:  # a lower bound read off PyPI: the runtime is not fully sourced
            assert "PyPI" in keys and not runtime.verified, runtime.version


def test_every_package_set_names_its_source_and_only_sourced_sets_are_verified() -> None:
    raw = _runtimes_yaml()
    for name, spec in raw["package_sets"].items():
        keys = set(_SOURCE_KEY.findall(str(spec["source"])))
        assert keys and keys <= set(CATALOG.sources), name
        if spec["verified"]:
            assert "VX" in keys, name  # only the images' published lists make a set verified
    used = {runtime.package_set for runtime in CATALOG.runtimes.values()}
    assert used == set(raw["package_sets"])  # no set without a runtime, no runtime without a set


def test_runtime_1_3_is_gone_and_1_13_is_retired_on_tensorflow_1_13_1() -> None:
    assert "1.3" not in CATALOG.runtimes  # no source names it
    assert CATALOG.runtimes["1.13"].retired and CATALOG.runtimes["1.13"].tensorflow == "1.13.1"
    assert not CATALOG.runtimes["1.14"].retired


@pytest.mark.parametrize(("version", "tensorflow", "pins"), [
    # The images' own versions (runtime-facts: VX tf-cpu.1-15 / 2-1 / 2-2, RN).
    ("1.15", "1.15.0", {"numpy": "1.16.5", "scipy": "1.2.2", "pandas": "0.24.2", "scikit-learn": "0.20.4",
                        "xgboost": "0.82", "google-cloud-storage": "1.19.1"}),
    ("2.1", "2.1.0", {"numpy": "1.18.0", "scikit-learn": "0.22.1", "google-cloud-storage": "1.23.0"}),
    ("2.2", "2.2.2", {"scikit-learn": "0.23.1", "pandas": "1.0.4", "google-cloud-storage": "1.29.0"}),
    ("2.4", "2.4.4", {"numpy": "1.19.4", "xgboost": "1.3.1", "google-cloud-storage": "1.35.0"}),
])
def test_the_images_package_versions_are_the_sources(version: str, tensorflow: str, pins: dict[str, str]) -> None:
    runtime = CATALOG.runtimes[version]
    assert runtime.tensorflow == tensorflow
    have = dict(p.split("==") for p in runtime.packages)
    assert {name: have[name] for name in pins} == pins


def test_only_a_runtimes_own_pandas_gets_uvs_reading_of_its_legacy_metadata() -> None:
    assert CATALOG.runtimes["1.15"].dependency_metadata == {
        "pandas==0.24.2": ("python-dateutil>=2.5.0", "pytz>=2011", "numpy>=1.12.0")}
    assert CATALOG.runtimes["2.1"].dependency_metadata == {}  # pandas 0.25.3 has metadata uv reads


def test_a_2x_job_without_python_version_is_told_the_one_python_it_runs() -> None:
    (line,) = runtime_warnings(TrainingInput(runtime_version="2.4"), CATALOG)
    assert line == ("no --python-version given: runtime 2.4 runs Python 3.7, the only one it supports (AI Platform "
                    "Training refused 2.x jobs without one); add --python-version 3.7")
    assert runtime_warnings(TrainingInput(runtime_version="2.4", python_version="3.7"), CATALOG) == []
    assert runtime_warnings(TrainingInput(runtime_version="1.15"), CATALOG) == []  # 2.7 was 1.15's default


def _problems(**training_input: Any) -> list[tuple[str, str, str | None]]:
    base: dict[str, Any] = {"region": "us-central1", "pythonModule": "trainer.task",
                            "packageUris": ["gs://my-bucket/t.tar.gz"], **training_input}
    return [(p.path, p.message, p.hint) for p in validate_job(parse_job({"jobId": "j", "trainingInput": base}),
                                                               CATALOG)]


def test_n1_highcpu_8_makes_standard_1_but_a_job_cannot_name_it() -> None:
    assert _problems(scaleTier="STANDARD_1") == []
    (problem,) = _problems(scaleTier="CUSTOM", masterType="n1-highcpu-8")
    assert problem[0] == "trainingInput.masterType"
    assert problem[1].startswith("n1-highcpu-8 is not a machine type AI Platform Training accepted in a job")
    assert problem[2] == "use n1-highcpu-16 or n1-standard-8"
    assert _problems(scaleTier="CUSTOM", masterType="n1-highcpu-16") == []


@pytest.mark.parametrize(("region", "accelerator"), [
    ("australia-southeast1", "NVIDIA_TESLA_P100"),  # RN 2020-05-13
    ("southamerica-east1", "NVIDIA_TESLA_T4"), ("asia-south1", "NVIDIA_TESLA_T4"),
    ("asia-northeast3", "NVIDIA_TESLA_T4"),
])
def test_the_regions_the_release_notes_added_take_their_accelerators(region: str, accelerator: str) -> None:
    assert _problems(region=region, scaleTier="CUSTOM", masterType="n1-standard-8",
                     masterConfig={"acceleratorConfig": {"type": accelerator, "count": "1"}}) == []
    assert _problems(region="us-west3") == []


def test_a_regions_zone_is_its_a_zone_unless_it_has_none() -> None:
    assert CATALOG.zone_of("us-central1") == "us-central1-a"
    assert CATALOG.zone_of("us-east1") == "us-east1-b" and CATALOG.zone_of("europe-west1") == "europe-west1-b"


def _runtimes_yaml() -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(CATALOG.source.with_name("runtimes.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data
