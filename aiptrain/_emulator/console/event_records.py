"""Scalars out of TensorFlow's summary event files, read without TensorFlow.

aiptrain never imports TensorFlow, and the console must not wait seconds for a trainer's Python to
start, so the two formats involved are read here directly:

- an event file (`*.tfevents.*`) is a sequence of TFRecords: a little-endian uint64 length, a
  4-byte CRC of it, the payload, a 4-byte CRC of the payload (the CRCs are not checked; a record
  cut short, by a writer still at work or killed, ends the read and is read again next time);
- each payload is a `tensorflow.Event` protocol buffer: `wall_time` (1, double), `step` (2, int64),
  `summary` (5): a `Summary` of `Value`s, each with a `tag` (1) and either a TF 1 `simple_value`
  (2, float) or a TF 2 `tensor` (8, a `TensorProto`) whose plugin (metadata 9 -> plugin_data 1 ->
  plugin_name 1) is `scalars`, of one element, as `tf.summary.scalar` writes it: in
  `tensor_content` (4, raw little-endian) or in the typed fields (`float_val` 5, `double_val` 6,
  `int_val` 7, `int64_val` 10, `half_val` 13), for the dtypes float, double, half, int32 and int64.

Both kinds count, as they do for `tuning.summary_events`. Everything else (graphs, histograms,
images, text) is skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

# TensorFlow's DataType numbers -> struct format of one element.
_DTYPES = {1: "<f", 2: "<d", 3: "<i", 9: "<q", 19: "<e"}
_HEADER = 12  # length (8) + its CRC (4)
_FOOTER = 4
MAX_RECORD_BYTES = 256 * 1024 * 1024  # a length beyond this is a damaged file, not a record


@dataclass(frozen=True)
class Scalar:
    tag: str
    step: int
    wall_time: float
    value: float


class ProtoError(ValueError):
    """A payload that is not a protocol buffer."""


def read_records(stream: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """(payload, offset after it) for each whole record from the stream's position."""
    while True:
        header = stream.read(_HEADER)
        if len(header) < _HEADER:
            return
        (length,) = struct.unpack("<Q", header[:8])
        if length > MAX_RECORD_BYTES:
            return
        body = stream.read(length + _FOOTER)
        if len(body) < length + _FOOTER:
            return
        yield body[:length], stream.tell()


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ProtoError("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of a message: an int for varints, bytes for the rest."""
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, position = _varint(data, position)
        elif wire == 1:
            value, position = data[position:position + 8], position + 8
        elif wire == 2:
            length, position = _varint(data, position)
            value, position = data[position:position + length], position + length
        elif wire == 5:
            value, position = data[position:position + 4], position + 4
        else:
            raise ProtoError(f"wire type {wire}")
        if position > len(data):
            raise ProtoError("truncated field")
        yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def scalars_of(payload: bytes) -> list[Scalar]:
    """The scalars one Event holds (none for an event of another kind, or a damaged one)."""
    wall_time, step, summary = 0.0, 0, b""
    try:
        for number, wire, value in fields(payload):
            if number == 1 and wire == 1 and isinstance(value, bytes):
                (wall_time,) = struct.unpack("<d", value)
            elif number == 2 and wire == 0 and isinstance(value, int):
                step = _signed64(value)
            elif number == 5 and wire == 2 and isinstance(value, bytes):
                summary = value
        if not summary:
            return []
        found = []
        for number, wire, value in fields(summary):
            if number == 1 and wire == 2 and isinstance(value, bytes):
                scalar = _value_scalar(value)
                if scalar is not None:
                    found.append(Scalar(scalar[0], step, wall_time, scalar[1]))
        return found
    except (ProtoError, struct.error):
        return []


def _value_scalar(data: bytes) -> tuple[str, float] | None:
    tag, simple, tensor, plugin = "", None, None, ""
    for number, wire, value in fields(data):
        if number == 1 and wire == 2 and isinstance(value, bytes):
            tag = value.decode("utf-8", errors="replace")
        elif number == 2 and wire == 5 and isinstance(value, bytes):
            (simple,) = struct.unpack("<f", value)
        elif number == 8 and wire == 2 and isinstance(value, bytes):
            tensor = value
        elif number == 9 and wire == 2 and isinstance(value, bytes):
            plugin = _plugin_name(value)
    if simple is not None:
        return tag, float(simple)
    if tensor is not None and plugin == "scalars":
        number_value = _tensor_scalar(tensor)
        return (tag, number_value) if number_value is not None else None
    return None


def _plugin_name(metadata: bytes) -> str:
    for number, wire, value in fields(metadata):
        if number == 1 and wire == 2 and isinstance(value, bytes):
            for inner, inner_wire, name in fields(value):
                if inner == 1 and inner_wire == 2 and isinstance(name, bytes):
                    return name.decode("utf-8", errors="replace")
    return ""


def _tensor_scalar(data: bytes) -> float | None:
    """The one number of a TensorProto, or None when it holds another kind or count of values."""
    dtype, content, elements = 0, b"", 1
    typed: list[float] = []
    for number, wire, value in fields(data):
        if number == 1 and isinstance(value, int):
            dtype = value
        elif number == 2 and isinstance(value, bytes):
            elements = _element_count(value)
        elif number == 4 and isinstance(value, bytes):
            content = value
        elif number in (5, 6, 7, 10, 13):
            typed += _typed_values(number, wire, value)
    if elements != 1 or dtype not in _DTYPES:
        return None
    if content:
        size = struct.calcsize(_DTYPES[dtype])
        return float(struct.unpack(_DTYPES[dtype], content[:size])[0]) if len(content) == size else None
    return typed[0] if len(typed) == 1 else None


def _element_count(shape: bytes) -> int:
    count = 1
    for number, wire, value in fields(shape):
        if number == 2 and wire == 2 and isinstance(value, bytes):
            size = next((v for n, _w, v in fields(value) if n == 1 and isinstance(v, int)), 0)
            count *= _signed64(size)
    return count


def _typed_values(number: int, wire: int, value: int | bytes) -> list[float]:
    """float_val (5), double_val (6), int_val (7), int64_val (10), half_val (13): packed or not."""
    if number in (5, 6):
        fmt = "<f" if number == 5 else "<d"
        if isinstance(value, bytes):
            size = struct.calcsize(fmt)
            usable = len(value) - len(value) % size
            return [float(v) for (v,) in struct.iter_unpack(fmt, value[:usable])]
        return []
    if isinstance(value, int):
        items = [value]
    else:
        items, position = [], 0
        while position < len(value):
            item, position = _varint(value, position)
            items.append(item)
    if number == 13:  # half floats, as the bits of an int32
        return [struct.unpack("<e", struct.pack("<H", item & 0xFFFF))[0] for item in items]
    if number == 7:
        return [float(item - (1 << 64) if item >= 1 << 63 else item) for item in items]
    return [float(_signed64(item)) for item in items]
