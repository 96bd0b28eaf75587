"""Write aiptrain/data/aiplatform_v1_enums.json: the proto numbers of the aiplatform v1 enums the
emulator's Vertex resources use, read from the Vertex AI SDK's own message descriptors.

The SDK's REST transport sends and asks for enums as integers (`$alt=json;enum-encoding=int`),
while the discovery documents list enum names only, not in number order. The emulator reads this
file (it never imports the SDK); tests/emulator/test_enum_numbers.py checks it against the SDK.

    python scripts/vertex_enum_numbers.py          # rewrite the file
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OUTPUT = REPO / "aiptrain" / "data" / "aiplatform_v1_enums.json"
# The resources the emulator serves, and what their methods answer.
ROOTS = (
    "GoogleCloudAiplatformV1CustomJob",
    "GoogleCloudAiplatformV1ListCustomJobsResponse",
    "GoogleCloudAiplatformV1HyperparameterTuningJob",
    "GoogleCloudAiplatformV1ListHyperparameterTuningJobsResponse",
    "GoogleCloudAiplatformV1TrainingPipeline",
    "GoogleCloudAiplatformV1ListTrainingPipelinesResponse",
)
SCHEMA_PREFIX = "GoogleCloudAiplatformV1"
PACKAGE = "google.cloud.aiplatform.v1."


def _messages_by_schema_id() -> dict[str, Any]:
    """Every message of the aiplatform v1 package, keyed as the discovery document names it
    (nested names flattened: StudySpec.ParameterSpec -> GoogleCloudAiplatformV1StudySpecParameterSpec)."""
    from google.cloud import aiplatform_v1

    found: dict[str, Any] = {}

    def add(descriptor: Any) -> None:
        flat = descriptor.full_name.removeprefix(PACKAGE).replace(".", "")
        found[SCHEMA_PREFIX + flat] = descriptor
        for nested in descriptor.nested_types:
            add(nested)

    files = {getattr(aiplatform_v1, name).pb().DESCRIPTOR.file
             for name in aiplatform_v1.__all__ if hasattr(getattr(aiplatform_v1, name), "pb")}
    for file in files:
        if file.package == PACKAGE.rstrip("."):
            for message in file.message_types_by_name.values():
                add(message)
    return found


def enum_numbers(document: dict[str, Any]) -> dict[str, dict[str, int]]:
    """`Schema.property` -> {enum name: number}, for each enum field reachable from ROOTS."""
    messages = _messages_by_schema_id()
    schemas: dict[str, Any] = document["schemas"]
    numbers: dict[str, dict[str, int]] = {}
    pending, seen = list(ROOTS), set()
    while pending:
        schema_id = pending.pop()
        if schema_id in seen or schema_id not in schemas:
            continue
        seen.add(schema_id)
        for prop, spec in (schemas[schema_id].get("properties") or {}).items():
            inner = spec.get("items") or spec.get("additionalProperties") or spec
            if "$ref" in inner:
                pending.append(inner["$ref"])
            if "enum" in inner:
                message = messages[schema_id]
                field = next(f for f in message.fields if f.json_name == prop)
                numbers[f"{schema_id}.{prop}"] = {value.name: value.number for value in field.enum_type.values}
    return dict(sorted(numbers.items()))


def main() -> None:
    from aiptrain._emulator.discovery import discovery_document

    OUTPUT.write_text(json.dumps(enum_numbers(discovery_document("aiplatform", "v1")), indent=1) + "\n")
    print(f"wrote {OUTPUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
