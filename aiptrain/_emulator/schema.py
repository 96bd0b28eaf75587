"""Request bodies checked against a discovery document's `schemas`, the way Google's front end does.

Google parses a JSON body into the request proto before any handler runs: unknown fields, wrong
types and enum values that do not exist are refused with 400 INVALID_ARGUMENT and one field
violation each, with the field path in the proto's snake_case (`job.training_input.scale_tier`).
Like the proto JSON parser, both the camelCase JSON names and the snake_case field names are
accepted; the validated copy returned uses the camelCase names only, and drops nulls.

Checked: `$ref`, object properties, maps (`additionalProperties`), arrays, string / boolean /
integer / number types, enums, int64 and uint64 (a number or a decimal string, in range), int32
ranges, `byte` (base64), `google-duration`, `google-datetime`.

Enums are names, in any case as the front end took them (`custom` is CUSTOM), or their proto
numbers where the document's fields were given them (`enum_numbers`, see `with_enum_numbers`):
the validated copy always holds the name as the document spells it.
`numbered_enums` turns a response's names back into numbers for a client that asked for them.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from dataclasses import dataclass
from typing import Any

_DURATION = re.compile(r"^-?\d+(\.\d{1,9})?s\Z")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})\Z")
_INTEGER = re.compile(r"^-?\d+\Z")
_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}


@dataclass(frozen=True)
class Violation:
    """A google.rpc.BadRequest.FieldViolation."""

    field: str
    description: str


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _proto_kind(schema: dict[str, Any]) -> str:
    """The proto type name Google's messages show, e.g. TYPE_INT64."""
    if "enum" in schema:
        return "TYPE_ENUM"
    fmt = schema.get("format")
    if fmt in _INT_RANGES:
        return f"TYPE_{fmt.upper()}"
    return {
        "boolean": "TYPE_BOOL",
        "number": "TYPE_DOUBLE" if schema.get("format") != "float" else "TYPE_FLOAT",
        "integer": "TYPE_INT32",
    }.get(str(schema.get("type")), "TYPE_STRING" if fmt != "byte" else "TYPE_BYTES")


# The key under which an enum field's schema keeps {name: proto number}.
ENUM_NUMBERS = "x-aiptrainEnumNumbers"


def with_enum_numbers(schemas: dict[str, Any], numbers: dict[str, dict[str, int]]) -> dict[str, Any]:
    """A copy of `schemas` whose enum fields named in `numbers` (`Schema.property` -> {name:
    number}) carry their numbers; the document's own schemas are left as they are."""
    copied = dict(schemas)
    for key, table in numbers.items():
        schema_id, prop = key.split(".", 1)
        schema = copied[schema_id] = {**copied[schema_id]}
        properties = schema["properties"] = dict(schema["properties"])
        field = properties[prop] = dict(properties[prop])
        if "items" in field:
            field["items"] = {**field["items"], ENUM_NUMBERS: table}
        else:
            field[ENUM_NUMBERS] = table
    return copied


class SchemaValidator:
    """Validates JSON values against the `schemas` of one discovery document."""

    def __init__(self, document: dict[str, Any], enum_numbers: dict[str, dict[str, int]] | None = None) -> None:
        self.schemas: dict[str, dict[str, Any]] = with_enum_numbers(document["schemas"], enum_numbers or {})

    def validate(self, value: Any, schema_id: str, root: str) -> tuple[Any, list[Violation]]:
        """(the value with camelCase keys and no nulls, every violation found).

        `root` names the body in field paths, as the request field holding it (`job`,
        `custom_job`, ...), or is empty when the body is the request itself.
        """
        violations: list[Violation] = []
        cleaned = self._check(value, {"$ref": schema_id}, root, violations)
        return cleaned, violations

    def numbered_enums(self, value: Any, schema_id: str) -> Any:
        """`value` (valid for `schema_id`) with each numbered enum's name replaced by its number."""
        return self._numbered(value, {"$ref": schema_id})

    def _numbered(self, value: Any, schema: dict[str, Any]) -> Any:
        schema = self._resolve(schema)
        if isinstance(value, dict):
            properties = schema.get("properties")
            if properties is None:
                extra = schema.get("additionalProperties")
                return {key: self._numbered(item, extra) for key, item in value.items()} if extra else value
            return {key: self._numbered(item, properties[key]) if key in properties else item
                    for key, item in value.items()}
        if isinstance(value, list):
            items = schema.get("items")
            return [self._numbered(item, items) for item in value] if items else value
        if isinstance(value, str) and ENUM_NUMBERS in schema:
            return schema[ENUM_NUMBERS].get(value, value)
        return value

    # -- walking ---------------------------------------------------------------------------

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.schemas[schema["$ref"]]
        return schema

    def _check(self, value: Any, schema: dict[str, Any], path: str, out: list[Violation]) -> Any:
        schema = self._resolve(schema)
        kind = schema.get("type")
        if kind == "any":
            return value
        if kind == "object" or "properties" in schema:
            return self._object(value, schema, path, out)
        if kind == "array":
            if not isinstance(value, list):
                out.append(self._invalid(path, schema, value))
                return None
            items = schema.get("items", {"type": "any"})
            return [self._check(item, items, f"{path}[{index}]", out) for index, item in enumerate(value)]
        return self._scalar(value, schema, path, out)

    def _object(self, value: Any, schema: dict[str, Any], path: str, out: list[Violation]) -> Any:
        if not isinstance(value, dict):
            out.append(Violation(path, f"Invalid JSON payload received. Expected an object at '{path}', "
                                 f"got {json.dumps(value)[:80]}."))
            return None
        properties: dict[str, Any] | None = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is None:
            if extra is None:
                return dict(value)  # a free-form object (Struct)
            cleaned_map = {}
            for key, item in value.items():
                if item is not None:
                    cleaned_map[key] = self._check(item, extra, f"{path}[{key}]", out)
            return cleaned_map
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            name = key if key in properties else _camel_case(key)
            if name not in properties:
                where = f" at '{path}'" if path else ""
                out.append(Violation(path, f'Invalid JSON payload received. Unknown name "{key}"{where}: '
                                     "Cannot find field."))
                continue
            if item is None:
                continue
            child = f"{path}.{snake_case(name)}" if path else snake_case(name)
            cleaned[name] = self._check(item, properties[name], child, out)
        return cleaned

    def _scalar(self, value: Any, schema: dict[str, Any], path: str, out: list[Violation]) -> Any:
        kind = schema.get("type")
        fmt = schema.get("format")
        ok = True
        if "enum" in schema:
            if ENUM_NUMBERS in schema and isinstance(value, int) and not isinstance(value, bool):
                # The proto JSON parser takes an enum's number as well as its name.
                value = next((name for name, number in schema[ENUM_NUMBERS].items() if number == value), value)
            if isinstance(value, str) and value not in schema["enum"]:
                value = _enum_name(value, schema["enum"])
            ok = isinstance(value, str) and value in schema["enum"]
            if not ok:
                out.append(Violation(path, self._invalid(path, schema, value).description
                                     + " (expected one of: " + ", ".join(schema["enum"]) + ")"))
                return None
        elif kind == "boolean":
            ok = isinstance(value, bool)
        elif kind == "integer" or fmt in ("int64", "uint64"):
            ok = self._integer_ok(value, str(fmt or "int32"))
            if ok:
                number = int(value.strip()) if isinstance(value, str) else int(value)
                # int64 travels as a decimal string in JSON (it does not fit a double).
                value = str(number) if fmt in ("int64", "uint64") else number
        elif kind == "number":
            # Proto JSON would take "NaN" and "Infinity"; no field of these APIs means anything by
            # them, and a stored NaN cannot be served back as JSON, so only finite numbers pass.
            ok = (not isinstance(value, bool) and (isinstance(value, int) or (
                isinstance(value, float) and math.isfinite(value)))) or (
                isinstance(value, str) and _is_finite(value))
        elif kind == "string":
            ok = isinstance(value, str) and self._string_format_ok(value, fmt)
        if not ok:
            out.append(self._invalid(path, schema, value))
            return None
        return value

    @staticmethod
    def _integer_ok(value: Any, fmt: str) -> bool:
        if isinstance(value, bool):
            return False
        if isinstance(value, float):
            if not value.is_integer():
                return False
            value = int(value)
        if isinstance(value, str):
            if len(value) > 40 or not _INTEGER.match(value.strip()):
                return False  # longer than any int64 (and than Python's int() accepts in bulk)
            value = int(value)
        if not isinstance(value, int):
            return False
        low, high = _INT_RANGES.get(fmt, _INT_RANGES["int32"])
        return low <= value <= high

    @staticmethod
    def _string_format_ok(value: str, fmt: str | None) -> bool:
        if fmt == "google-duration":
            return bool(_DURATION.match(value))
        if fmt == "google-datetime":
            return bool(_DATETIME.match(value))
        if fmt == "byte":
            try:
                base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4),
                                 validate=True)
            except (binascii.Error, ValueError):
                return False
        return True

    @staticmethod
    def _invalid(path: str, schema: dict[str, Any], value: Any) -> Violation:
        return Violation(path, f"Invalid value at '{path}' ({_proto_kind(schema)}), {json.dumps(value)}")


def _enum_name(value: str, names: list[str]) -> str:
    """The enum name `value` spells in another case (`custom` -> `CUSTOM`), else `value` itself.

    The services' JSON front end took enum names in any case, and clients rely on it
    (tensorflow-cloud sends `scaleTier: "custom"`); the validated copy holds the canonical name.
    """
    folded = value.casefold()
    return next((name for name in names if name.casefold() == folded), value)


def _is_finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except (ValueError, OverflowError):
        return False
