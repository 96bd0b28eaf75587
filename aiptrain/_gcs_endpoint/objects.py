"""Buckets and objects as the local store keeps them: `ROOT/BUCKET/NAME` plain files.

The replicas' storage endpoint (`api.py`) answers the Cloud Storage API from here, so what a
trainer writes through `gs://` is the very file `aiptrain` staged or a later job reads by path.
Names map with `local_path_for` (no `..`, no empty segments, valid bucket names).

Every bucket with a valid name exists (its folder is created on first write), as in the rest of
the local store. GCS has no directories, the file system does: an object whose name ends in `/` (what
TensorFlow writes for `makedirs`) is the directory itself, listings show every directory as a
prefix (with a delimiter) and an empty one as its `NAME/` object (without), and an object cannot
share its name with a directory. Writes go to a temporary file under `ROOT/.aiptrain-uploads`
(never listed: bucket names cannot start with a dot) and are renamed into place complete, so a
reader never sees half an object and concurrent writers of one name each write a whole one.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import importlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from aiptrain._job.limits import MAX_OBJECT_NAME_BYTES
from aiptrain._storage.local import local_path_for
from aiptrain.errors import UsageError

_UPLOADS = ".aiptrain-uploads"
_BLOCK = 1024 * 1024


class StorageError(Exception):
    """A request the store cannot satisfy; `status` and `reason` are what the GCS API answers."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def not_found(what: str) -> StorageError:
    return StorageError(404, "notFound", f"No such object: {what}")


@dataclass(frozen=True)
class ObjectMeta:
    bucket: str
    name: str
    size: int
    generation: int  # the file's modification time in ns: changes with every write
    updated_ns: int
    crc32c: str | None = None  # base64, known for objects written through the endpoint
    md5: str | None = None  # base64, computed when a client asks for it (see `with_hashes`)


class _Checksum(Protocol):
    def update(self, data: bytes) -> None: ...
    def digest(self) -> bytes: ...


class ContentHashes:
    """GCS's checksums, computed while a body streams in: the CRC32C that google-cloud-storage
    compares, and the MD5 that `gcloud storage cp` and gsutil compare.

    Without `md5` only the CRC32C is computed (it costs a tenth of the MD5): for a client that never
    reads the answer's hashes, the MD5 is left to whoever asks for it later (`with_hashes`).
    """

    def __init__(self, *, md5: bool = True) -> None:
        self._checksum: _Checksum | None = None
        self._md5 = hashlib.md5(usedforsecurity=False) if md5 else None
        try:  # google-crc32c comes with google-cloud-storage
            self._checksum = importlib.import_module("google_crc32c").Checksum()
        except ImportError:  # pragma: no cover
            pass

    def update(self, data: bytes) -> None:
        if self._md5 is not None:
            self._md5.update(data)
        if self._checksum is not None:
            self._checksum.update(data)

    def value(self) -> str | None:
        return None if self._checksum is None else base64.b64encode(self._checksum.digest()).decode()

    def md5(self) -> str | None:
        return None if self._md5 is None else base64.b64encode(self._md5.digest()).decode()


class Buckets(Protocol):
    """What the endpoint serves from: the local store (`DirectoryBuckets`) or a GCS emulator."""

    def path(self, bucket: str, name: str = "") -> Path: ...
    def bucket_path(self, bucket: str) -> Path: ...
    def buckets(self) -> list[str]: ...
    def create_bucket(self, bucket: str) -> None: ...
    def stat(self, bucket: str, name: str) -> ObjectMeta | None: ...
    def open(self, bucket: str, name: str) -> contextlib.AbstractContextManager[tuple[BinaryIO, ObjectMeta]]: ...
    def listing(self, bucket: str, prefix: str, delimiter: str) -> list[tuple[str, ObjectMeta | None]]: ...
    def new_upload_file(self) -> Path: ...
    def commit(self, bucket: str, name: str, source: Path, crc32c: str | None,
               if_generation_match: int | None = None) -> ObjectMeta: ...
    def delete(self, bucket: str, name: str) -> None: ...
    def copy(self, bucket: str, name: str, to_bucket: str, to_name: str) -> ObjectMeta: ...
    def compose(self, bucket: str, sources: list[str], name: str) -> ObjectMeta: ...


def _is_hidden(name: str) -> bool:
    """Temporary files of the local store's own writes (`.NAME.xxxx.partial`)."""
    return name.startswith(".") and name.endswith(".partial")


class DirectoryBuckets:
    """The local store's tree seen as buckets and objects."""

    def __init__(self, root: Path) -> None:
        self.root = root

    # -- names -------------------------------------------------------------------------------

    def path(self, bucket: str, name: str = "") -> Path:
        size = len(name.encode("utf-8", errors="surrogatepass"))
        if size > MAX_OBJECT_NAME_BYTES:  # as Cloud Storage refuses it
            raise StorageError(400, "invalid", f"The maximum object length is {MAX_OBJECT_NAME_BYTES} bytes, "
                               f"but got a name with {size} bytes")
        try:
            path = local_path_for(f"gs://{bucket}/{name}", self.root)
        except UsageError as error:
            raise StorageError(400, "invalid", error.message) from None
        return path

    def bucket_path(self, bucket: str) -> Path:
        """The bucket's folder. As everywhere in the local store, every valid bucket exists: it is
        a folder created on first write (a check of its name is all there is)."""
        return self.path(bucket)

    def create_bucket(self, bucket: str) -> None:
        path = self.path(bucket)
        if path.is_dir():
            raise StorageError(409, "conflict", f"You already own this bucket: {bucket}")
        path.mkdir(parents=True, exist_ok=True)

    def buckets(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(entry.name for entry in self.root.iterdir() if entry.is_dir() and not entry.name.startswith("."))

    # -- reading -----------------------------------------------------------------------------

    def stat(self, bucket: str, name: str) -> ObjectMeta | None:
        self.bucket_path(bucket)
        if not name:
            return None
        path = self.path(bucket, name)
        try:
            info = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if name.endswith("/"):
            return ObjectMeta(bucket, name, 0, info.st_mtime_ns, info.st_mtime_ns) if path.is_dir() else None
        if not path.is_file():
            return None
        return ObjectMeta(bucket, name, info.st_size, info.st_mtime_ns, info.st_mtime_ns)

    @contextlib.contextmanager
    def open(self, bucket: str, name: str) -> Iterator[tuple[BinaryIO, ObjectMeta]]:
        """The object's bytes (a file open for reading) and its metadata, from one open file."""
        meta = self.stat(bucket, name)
        if meta is None:
            raise not_found(f"{bucket}/{name}")
        if name.endswith("/"):
            with open(os.devnull, "rb") as empty:
                yield empty, meta
            return
        with self.path(bucket, name).open("rb") as stream:
            info = os.fstat(stream.fileno())
            yield stream, ObjectMeta(bucket, name, info.st_size, info.st_mtime_ns, info.st_mtime_ns)

    def listing(self, bucket: str, prefix: str, delimiter: str) -> list[tuple[str, ObjectMeta | None]]:
        """Sorted (name, object) entries under `prefix`; with a `/` delimiter, (prefix, None) for subfolders."""
        base = self.bucket_path(bucket)
        folder, _, start = prefix.rpartition("/")
        directory = self.path(bucket, folder) if folder else base
        if not directory.is_dir():
            return []
        lead = f"{folder}/" if folder else ""
        entries: list[tuple[str, ObjectMeta | None]] = []
        if delimiter == "/":
            for entry in os.scandir(directory):
                if not entry.name.startswith(start) or _is_hidden(entry.name):
                    continue
                if entry.is_dir():
                    entries.append((f"{lead}{entry.name}/", None))
                elif entry.is_file():
                    info = entry.stat()
                    name = f"{lead}{entry.name}"
                    entries.append((name, ObjectMeta(bucket, name, info.st_size, info.st_mtime_ns, info.st_mtime_ns)))
        else:
            for top, folders, files in os.walk(directory):
                relative = os.path.relpath(top, base).replace(os.sep, "/")
                here = "" if relative == "." else f"{relative}/"
                folders.sort()
                if here and not folders and not files and here.startswith(prefix):
                    info = os.stat(top)
                    entries.append((here, ObjectMeta(bucket, here, 0, info.st_mtime_ns, info.st_mtime_ns)))
                for file_name in files:
                    name = f"{here}{file_name}"
                    if _is_hidden(file_name) or not name.startswith(prefix):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        info = os.stat(os.path.join(top, file_name))
                        entries.append((name, ObjectMeta(bucket, name, info.st_size, info.st_mtime_ns,
                                                         info.st_mtime_ns)))
        entries.sort(key=lambda entry: entry[0].encode())
        return entries

    # -- writing -----------------------------------------------------------------------------

    def new_upload_file(self) -> Path:
        """An empty temporary file on the store's file system, to be `commit`ted or deleted."""
        folder = self.root / _UPLOADS
        folder.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix="upload-")
        os.close(fd)
        return Path(temporary)

    def commit(self, bucket: str, name: str, source: Path, crc32c: str | None,
               if_generation_match: int | None = None) -> ObjectMeta:
        """Rename a finished upload into place as the object `name`."""
        self.bucket_path(bucket)
        if not name:
            raise StorageError(400, "required", "Required: the object name")
        target = self.path(bucket, name)
        if if_generation_match is not None:
            current = self.stat(bucket, name)
            if (current.generation if current is not None else 0) != if_generation_match:
                source.unlink(missing_ok=True)
                raise StorageError(412, "conditionNotMet",
                                   "At least one of the pre-conditions you specified did not hold.")
        try:
            if name.endswith("/"):
                source.unlink(missing_ok=True)
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.chmod(source, 0o644)
                os.replace(source, target)
        except (IsADirectoryError, NotADirectoryError, FileExistsError) as error:
            source.unlink(missing_ok=True)
            raise StorageError(409, "conflict", f"{bucket}/{name} cannot be written here: a folder and an object "
                               f"of the same name cannot both exist in the local store ({error.strerror})") from None
        meta = self.stat(bucket, name)
        assert meta is not None
        return ObjectMeta(meta.bucket, meta.name, meta.size, meta.generation, meta.updated_ns, crc32c)

    def delete(self, bucket: str, name: str) -> None:
        self.bucket_path(bucket)
        path = self.path(bucket, name)
        if name.endswith("/"):
            if not path.is_dir():
                raise not_found(f"{bucket}/{name}")
            with contextlib.suppress(OSError):
                path.rmdir()  # a folder with objects in it stays: they are not deleted with it
            return
        try:
            if path.is_dir():
                raise not_found(f"{bucket}/{name}")
            path.unlink()
        except FileNotFoundError:
            raise not_found(f"{bucket}/{name}") from None

    def copy(self, bucket: str, name: str, to_bucket: str, to_name: str) -> ObjectMeta:
        return self._concatenate([(bucket, name)], to_bucket, to_name)

    def compose(self, bucket: str, sources: list[str], name: str) -> ObjectMeta:
        return self._concatenate([(bucket, source) for source in sources], bucket, name)

    def _concatenate(self, sources: list[tuple[str, str]], bucket: str, name: str) -> ObjectMeta:
        """Write the sources' bytes one after the other as the object `name` (a copy: one source)."""
        temporary = self.new_upload_file()
        checksum = ContentHashes()
        try:
            with temporary.open("wb") as out:
                for source_bucket, source in sources:
                    with self.open(source_bucket, source) as (stream, _meta):
                        while block := stream.read(_BLOCK):
                            checksum.update(block)
                            out.write(block)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return self.commit(bucket, name, temporary, checksum.value())


def with_hashes(buckets: Buckets, meta: ObjectMeta) -> ObjectMeta:
    """`meta` with the object's MD5 and CRC32C, read from its content.

    gsutil refuses to download an object whose metadata carries neither (and checks them); the
    local store keeps no checksums, so they are computed for the clients that ask.
    """
    hashes = ContentHashes()
    with buckets.open(meta.bucket, meta.name) as (stream, _meta):
        while block := stream.read(1 << 20):
            hashes.update(block)
    return dataclasses.replace(meta, md5=hashes.md5(), crc32c=hashes.value())
