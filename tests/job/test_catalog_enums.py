"""The tiers and accelerators are listed in several places that must agree: the catalog
(scale_tiers.yaml, what the flags and the local engine accept), the enums of job/spec.py (what a
Job parses), the service's own ml v1 document, and for Vertex AI the aiplatform v1 enum table."""

from __future__ import annotations

import json
from pathlib import Path

from aiptrain._job.catalog import load_catalog
from aiptrain._job.spec import AcceleratorType, ScaleTier

DATA = Path(__file__).resolve().parents[2] / "aiptrain" / "data"
UNSPECIFIED = "ACCELERATOR_TYPE_UNSPECIFIED"  # an enum's zero value, never an accelerator of a job


def test_the_catalogs_tiers_are_the_scale_tier_enum() -> None:
    assert set(load_catalog().tiers) == {tier.value for tier in ScaleTier}


def test_the_catalogs_accelerators_are_the_accelerator_enum() -> None:
    assert set(load_catalog().accelerators) == {kind.value for kind in AcceleratorType} - {UNSPECIFIED}


def test_the_enums_are_the_services() -> None:
    from aiptrain._emulator.discovery import discovery_document

    schemas = discovery_document("ml", "v1")["schemas"]
    assert schemas["GoogleCloudMlV1__TrainingInput"]["properties"]["scaleTier"]["enum"] == list(ScaleTier)
    assert schemas["GoogleCloudMlV1__AcceleratorConfig"]["properties"]["type"]["enum"] == list(AcceleratorType)


def test_every_vertex_accelerator_of_the_catalog_is_one_vertex_knows() -> None:
    table = json.loads((DATA / "aiplatform_v1_enums.json").read_text(encoding="utf-8"))
    vertex = set(table["GoogleCloudAiplatformV1MachineSpec.acceleratorType"]) - {UNSPECIFIED}
    named = {spec["vertex"] for spec in load_catalog().accelerators.values() if spec.get("vertex")}
    assert named, "the catalog names no Vertex accelerator: the check would hold for nothing"
    assert named <= vertex, sorted(named - vertex)
