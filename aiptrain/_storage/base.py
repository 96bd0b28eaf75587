"""The ObjectStore protocol and gs:// URI helpers shared by every store."""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
class FileState:
    """What `stat` says about a file: enough to tell that it has not been written to since.

    A write changes the size or the modification time, and always the change time (which,
    unlike the modification time, cannot be set back); replacing the file changes the inode.
    """

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, result: os.stat_result) -> FileState:
        return cls(result.st_dev, result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


def file_state(path: Path) -> FileState:
    return FileState.of(path.stat())


@dataclass(frozen=True)
class LocalDigests:
    """The checksums of a local file, in the forms object stores report them."""

    size: int
    sha256: str  # hex
    # base64, like GCS's md5Hash; computed only without google-crc32c (see DigestBuilder)
    md5: str | None
    crc32c: str | None  # base64 big-endian, like GCS's crc32c; None without google-crc32c
    # The file as it was when it was read, when that state can vouch for the content later
    # (see `digest_file`); None when nobody can tell.
    state: FileState | None = field(default=None, compare=False)

    def still_describe(self, path: Path) -> bool:
        """True when `path` is provably the file these digests were computed from, untouched.

        False means "read it again", not "it changed": a file written just before it was hashed
        never qualifies, nor does one whose state cannot be read.
        """
        if self.state is None:
            return False
        try:
            return file_state(path) == self.state
        except OSError:
            return False


_DIGEST_BLOCK = 1024 * 1024
# File systems keep modification times with a granularity of up to 2 s (FAT; 1 s on older
# ext3/HFS+), so a write landing in the same tick as the write before it may leave every stat
# field but the content unchanged. Digests of a file modified this recently are therefore not
# vouched for by its state, the way git treats "racily clean" index entries.
_RACY_WINDOW_NS = 3_000_000_000


class DigestBuilder:
    """Accumulates the checksums the stores compare against over blocks of a file's bytes.

    sha256 names staged objects. For integrity, crc32c is what GCS computes for every object
    (composite ones included) and what its tools check when they can; md5 is only the fallback
    when google-crc32c is missing. Computing md5 as well would add nothing a matching size,
    crc32c and sha256 do not already say, and it is the slowest of the three: most of the time
    of hashing a large package.
    """

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._crc = _new_crc32c()
        self._md5 = hashlib.md5(usedforsecurity=False) if self._crc is None else None
        self.size = 0

    def update(self, block: bytes) -> None:
        self.size += len(block)
        self._sha.update(block)
        if self._crc is not None:
            self._crc.update(block)
        if self._md5 is not None:
            self._md5.update(block)

    def result(self, state: FileState | None = None) -> LocalDigests:
        return LocalDigests(
            size=self.size,
            sha256=self._sha.hexdigest(),
            md5=_base64(self._md5.digest()) if self._md5 is not None else None,
            crc32c=_base64(self._crc.digest()) if self._crc is not None else None,
            state=state,
        )


def _base64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def digest_file(path: Path) -> LocalDigests:
    """Read `path` once and compute every checksum the stores compare against.

    The result carries the file's state taken before reading, so a write during the read shows
    as a different state later; it is left out when the file was modified too recently for its
    state to prove anything (`_RACY_WINDOW_NS`).
    """
    builder = DigestBuilder()
    with path.open("rb") as stream:
        before = os.fstat(stream.fileno())
        settled = time.time_ns() - max(before.st_mtime_ns, before.st_ctime_ns) > _RACY_WINDOW_NS
        while block := stream.read(_DIGEST_BLOCK):
            builder.update(block)
    return builder.result(FileState.of(before) if settled else None)


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

    # The directory the objects are files in, where they are on this machine (the local store);
    # None for a remote store.
    @property
    def root(self) -> Path | None: ...

    # Metadata of the object, or None when it does not exist.
    def stat(self, uri: str) -> ObjectInfo | None: ...

    # Upload a local file; safe when several uploads of one object race. `digests`, when the
    # caller already has them (staging does), saves reading the file once more to hash it; the
    # store still checks what it wrote against them.
    def upload(
        self,
        local: Path,
        uri: str,
        *,
        progress: ProgressCallback | None = None,
        digests: LocalDigests | None = None,
    ) -> ObjectInfo: ...

    def download(self, uri: str, local: Path) -> None: ...
