"""The ObjectStore protocol and gs:// URI helpers shared by every store."""

from __future__ import annotations

import base64
import hashlib
import importlib
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
    generation: int | None = None  # GCS object generation; None for the local store
    # Set by `upload()` when an identical object was already there (for instance a concurrent
    # uploader of the same content-addressed name won the race), so nothing new was written.
    already_present: bool = False

    def matches(self, local: LocalDigests) -> bool:
        """True when this object holds the same bytes as the local file.

        Every checksum both sides know must agree, and at least one must be known. The sha256 is
        the one we record at upload time; objects written by other tools only carry what GCS
        computes itself (crc32c always, md5 unless the object is composite).
        """
        pairs = [
            (self.sha256, local.sha256),
            (self.crc32c, local.crc32c),
            (self.md5, local.md5),
        ]
        known = [(remote, mine) for remote, mine in pairs if remote is not None and mine is not None]
        return self.size == local.size and bool(known) and all(r == m for r, m in known)


@dataclass(frozen=True)
class LocalDigests:
    """The checksums of a local file, in the forms object stores report them."""

    size: int
    sha256: str  # hex
    md5: str  # base64, like GCS's md5Hash
    crc32c: str | None  # base64 big-endian, like GCS's crc32c; None without google-crc32c


_DIGEST_BLOCK = 1024 * 1024


def digest_file(path: Path) -> LocalDigests:
    """Read `path` once and compute every checksum the stores compare against."""
    sha = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False)
    crc = _new_crc32c()
    size = 0
    with path.open("rb") as stream:
        while block := stream.read(_DIGEST_BLOCK):
            size += len(block)
            sha.update(block)
            md5.update(block)
            if crc is not None:
                crc.update(block)
    return LocalDigests(
        size=size,
        sha256=sha.hexdigest(),
        md5=base64.b64encode(md5.digest()).decode("ascii"),
        crc32c=base64.b64encode(crc.digest()).decode("ascii") if crc is not None else None,
    )


class _Crc32c(Protocol):
    def update(self, data: bytes) -> None: ...
    def digest(self) -> bytes: ...


def _new_crc32c() -> _Crc32c | None:
    # google-crc32c comes with google-cloud-storage; without it we fall back to md5/sha256.
    try:
        module = importlib.import_module("google_crc32c")
    except ImportError:
        return None
    checksum: _Crc32c = module.Checksum()
    return checksum


def split_gs_uri(uri: str) -> tuple[str, str]:
    """`gs://bucket/a/b` -> ("bucket", "a/b"); the object part may be empty."""
    if not uri.startswith("gs://"):
        raise UsageError(f"{uri!r} is not a gs:// URI", hint="write it as gs://BUCKET/PATH")
    bucket, _, name = uri[len("gs://"):].partition("/")
    if not bucket:
        raise UsageError(f"{uri!r} names no bucket", hint="write it as gs://BUCKET/PATH")
    return bucket, name


def join_gs_uri(bucket: str, name: str) -> str:
    """("bucket", "a/b") -> `gs://bucket/a/b`."""
    return f"gs://{bucket}/{name.lstrip('/')}" if name else f"gs://{bucket}"


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
