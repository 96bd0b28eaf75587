"""The ObjectStore protocol and gs:// URI helpers shared by every store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from aiptrain.errors import UsageError

# Called with (bytes sent so far, total bytes) while an upload runs.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class ObjectInfo:
    uri: str
    size: int
    sha256: str | None = None  # from object metadata, when the writer recorded it
    crc32c: str | None = None  # base64, as GCS reports it
    md5: str | None = None  # base64, as GCS reports it


def split_gs_uri(uri: str) -> tuple[str, str]:
    """`gs://bucket/a/b` -> ("bucket", "a/b"); the object part may be empty."""
    if not uri.startswith("gs://"):
        raise UsageError(f"{uri!r} is not a gs:// URI", hint="write it as gs://BUCKET/PATH")
    bucket, _, name = uri[len("gs://"):].partition("/")
    if not bucket:
        raise UsageError(f"{uri!r} names no bucket", hint="write it as gs://BUCKET/PATH")
    return bucket, name


class ObjectStore(Protocol):
    # "gcs" or "local".
    kind: ClassVar[str]

    # Metadata of the object, or None when it does not exist.
    def stat(self, uri: str) -> ObjectInfo | None: ...

    # Upload a local file; safe when several uploads of one object race.
    def upload(self, local: Path, uri: str, *, progress: ProgressCallback | None = None) -> ObjectInfo: ...

    def download(self, uri: str, local: Path) -> None: ...

    # Raise NotFound / PermissionDenied naming the bucket if it cannot be written.
    def check_bucket(self, bucket: str) -> None: ...
