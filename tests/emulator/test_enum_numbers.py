"""The enum numbers the emulator ships (aiptrain/data/aiplatform_v1_enums.json) are the SDK's."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aiptrain._emulator.discovery import discovery_document
from aiptrain._emulator.schema import SchemaValidator
from aiptrain._emulator.services import enum_numbers

pytest.importorskip("google.cloud.aiplatform_v1")
REPO = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vertex_enum_numbers", REPO / "scripts" / "vertex_enum_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_shipped_numbers_are_the_sdks() -> None:
    expected = _generator().enum_numbers(discovery_document("aiplatform", "v1"))
    assert enum_numbers() == json.loads(json.dumps(expected)), "run: python scripts/vertex_enum_numbers.py"


def test_a_number_reads_as_its_name_and_goes_back_as_a_number() -> None:
    validator = SchemaValidator(discovery_document("aiplatform", "v1"), enum_numbers())
    spec = {"machineType": "n1-standard-4", "acceleratorType": 8, "acceleratorCount": 2}
    cleaned, violations = validator.validate(spec, "GoogleCloudAiplatformV1MachineSpec", "machine_spec")
    assert violations == []
    assert cleaned["acceleratorType"] == "NVIDIA_TESLA_A100"  # 8, not the 8th name of the document's list
    numbered = validator.numbered_enums(cleaned, "GoogleCloudAiplatformV1MachineSpec")
    assert numbered == spec
    _, refused = validator.validate({**spec, "acceleratorType": True}, "GoogleCloudAiplatformV1MachineSpec", "m")
    assert [v.field for v in refused] == ["m.accelerator_type"]
