"""The local object store: `gs://BUCKET/PATH` lives at `$AIPTRAIN_HOME/storage/BUCKET/PATH`.

This is what the local backend uses instead of Cloud Storage, the way Vertex AI mounts buckets
under `/gcs/`. Trainers read and write the directory tree directly, so it holds plain files and
nothing else: the checksums recorded at upload time live in a separate tree,
`STORAGE/.aiptrain-meta/BUCKET/PATH.json` (a GCS bucket name can never start with a dot, so that
directory cannot collide with a bucket).

The local store has no permissions and no bucket registry: a bucket is just a directory and is
created on first use.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from aiptrain._paths import HomeLayout
from aiptrain._storage.base import (
    DigestBuilder,
    LocalDigests,
    ObjectInfo,
    ProgressCallback,
    digest_file,
    split_gs_uri,
)
from aiptrain.errors import NotFound, OperationalError, UsageError

_META_DIR = ".aiptrain-meta"
_COPY_BLOCK = 1024 * 1024

# GCS bucket naming: lowercase letters, digits, '-', '_' and '.', starting and ending with a
# letter or digit, 3 to 222 characters (63 per dot-separated part, not checked here).
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]\Z")


def default_storage_root() -> Path:
    """`$AIPTRAIN_HOME/storage`."""
    return HomeLayout.of().storage


# The longest file name Linux file systems take (NAME_MAX); a longer segment cannot be a file here.
MAX_SEGMENT_BYTES = 255


def local_path_for(uri: str, storage_root: Path) -> Path:
    """Map `gs://BUCKET/PATH` to `storage_root/BUCKET/PATH`, refusing anything that could escape.

    Pure: touches no file. A trailing slash (`gs://b/job/`) maps to the directory itself.
    Raises UsageError for names that are not plain relative paths: `..` or `.` segments,
    empty segments (`a//b`), a leading slash, NUL bytes, a segment longer than a file name can
    be, or a bucket name GCS would refuse.
    """
    bucket, name = split_gs_uri(uri)
    _check_bucket_name(bucket, uri)
    segments = name.split("/") if name else []
    if segments and segments[-1] == "":
        segments.pop()  # `gs://b/dir/` names the directory
    for segment in segments:
        if segment in ("", ".", "..") or "\0" in segment:
            raise UsageError(
                f"{uri!r} cannot be mapped to local storage: the object name must be a plain "
                "relative path (no '.', '..', empty or absolute segments)",
                hint="write it as gs://BUCKET/dir/file",
            )
        size = len(segment.encode("utf-8", errors="surrogatepass"))
        if size > MAX_SEGMENT_BYTES:
            raise UsageError(
                f"{uri!r} cannot be mapped to local storage: it keeps each object as a file, and a file "
                f"name has at most {MAX_SEGMENT_BYTES} bytes (a segment of this name has {size})",
                hint="shorten that part of the path, or split it with '/'",
            )
    return storage_root.joinpath(bucket, *segments)


def _check_bucket_name(bucket: str, uri: str) -> None:
    if not _BUCKET_NAME.match(bucket) or ".." in bucket:
        raise UsageError(
            f"{uri!r}: {bucket!r} is not a valid bucket name",
            hint="bucket names use lowercase letters, digits, '-', '_' and '.', 3 to 222 characters",
        )


class LocalObjectStore:
    """An ObjectStore over a directory tree (`$AIPTRAIN_HOME/storage` by default)."""

    kind: ClassVar[str] = "local"

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_storage_root()

    def path_for(self, uri: str) -> Path:
        return local_path_for(uri, self.root)

    def stat(self, uri: str) -> ObjectInfo | None:
        path = self.path_for(uri)
        if not path.is_file():
            return None
        return self._info(uri, path, self._digests(uri, path))

    def upload(
        self,
        local: Path,
        uri: str,
        *,
        progress: ProgressCallback | None = None,
        digests: LocalDigests | None = None,
    ) -> ObjectInfo:
        """Copy `local` to the object's path. The returned checksums (and the sidecar) are those
        of the bytes actually copied, hashed while copying, so a caller comparing them with
        `digests` sees a file that changed on the way."""
        target = self._object_path(uri)
        if not local.is_file():
            raise UsageError(f"cannot upload {local}: not a file")
        if target.is_file():
            existing = self._info(uri, target, self._digests(uri, target))
            wanted = digests if digests is not None else digest_file(local)
            if existing.matches(wanted):
                if progress is not None:
                    progress(wanted.size, wanted.size)
                return dataclasses.replace(existing, already_present=True)
        total = digests.size if digests is not None else local.stat().st_size
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # Hashed while copying: the sidecar then describes exactly the bytes that were written.
            builder = DigestBuilder()
            _atomic_copy(local, target, total, progress, observe=builder.update)
            copied = builder.result()
            self._write_sidecar(uri, target, copied)
        except OSError as exc:
            raise OperationalError(
                f"could not write {uri} to local storage at {target}: {exc.strerror or exc}",
                hint=f"check that {self.root} is writable and that no file sits where a directory "
                "of the object name should be",
            ) from exc
        return self._info(uri, target, copied)

    def download(self, uri: str, local: Path) -> None:
        source = self.path_for(uri)
        if not source.is_file():
            raise NotFound(f"{uri} does not exist (looked for {source})")
        local.parent.mkdir(parents=True, exist_ok=True)
        _atomic_copy(source, local, source.stat().st_size, None)

    # -- internals -------------------------------------------------------------------------

    def _object_path(self, uri: str) -> Path:
        _, name = split_gs_uri(uri)
        if not name or name.endswith("/"):
            raise UsageError(f"{uri!r} names a directory, not an object", hint="add a file name")
        return self.path_for(uri)

    def _sidecar_path(self, uri: str) -> Path:
        relative = self.path_for(uri).relative_to(self.root)
        return self.root / _META_DIR / relative.parent / (relative.name + ".json")

    def _digests(self, uri: str, path: Path) -> LocalDigests:
        """The sidecar's checksums when they still describe this very file, else fresh ones.

        A sidecar is trusted only for the file it was written for: same size, mtime and inode
        (every upload renames a new inode into place). Files a trainer wrote directly have no
        sidecar and are hashed on demand.
        """
        stat = path.stat()
        try:
            recorded = json.loads(self._sidecar_path(uri).read_text())
            if (recorded["size"], recorded["mtime_ns"], recorded["inode"]) == (
                stat.st_size,
                stat.st_mtime_ns,
                stat.st_ino,
            ):
                return LocalDigests(
                    size=recorded["size"],
                    sha256=recorded["sha256"],
                    md5=recorded["md5"],
                    crc32c=recorded["crc32c"],
                )
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return digest_file(path)

    def _write_sidecar(self, uri: str, target: Path, digests: LocalDigests) -> None:
        stat = target.stat()
        record = {
            "size": digests.size,
            "sha256": digests.sha256,
            "md5": digests.md5,
            "crc32c": digests.crc32c,
            "mtime_ns": stat.st_mtime_ns,
            "inode": stat.st_ino,
        }
        sidecar = self._sidecar_path(uri)
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=sidecar.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as stream:
                json.dump(record, stream, sort_keys=True)
            os.replace(tmp, sidecar)
        except BaseException:
            _unlink_quietly(Path(tmp))
            raise

    @staticmethod
    def _info(uri: str, path: Path, digests: LocalDigests) -> ObjectInfo:
        return ObjectInfo(
            uri=uri,
            size=path.stat().st_size,
            sha256=digests.sha256,
            crc32c=digests.crc32c,
            md5=digests.md5,
        )


def _atomic_copy(
    source: Path,
    target: Path,
    total: int,
    progress: ProgressCallback | None,
    *,
    observe: Callable[[bytes], None] | None = None,
) -> None:
    """Copy through a temporary file in the target's directory, then rename it into place;
    `observe` sees every block copied.

    Readers never see a half-written file, and concurrent writers of the same name each rename a
    complete file (the last one wins).
    """
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        sent = 0
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            while block := src.read(_COPY_BLOCK):
                out.write(block)
                if observe is not None:
                    observe(block)
                sent += len(block)
                if progress is not None:
                    progress(sent, total)
        if progress is not None and sent == 0:
            progress(0, total)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        _unlink_quietly(Path(tmp))
        raise


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass

