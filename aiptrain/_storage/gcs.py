"""Cloud Storage through google-cloud-storage.

The only module that imports `google.cloud.storage` or `google.api_core`; every Google exception
is translated here into an aiptrain one (NotFound / PermissionDenied / OperationalError) whose
message names the bucket and whose hint says what to do. The Google imports happen on first use,
so importing this module costs nothing at CLI start.

Upload design, since staging objects are content-addressed and shared across jobs:

- Every write carries a generation precondition: `if_generation_match=0` ("create only"), or
  the exact generation being replaced. That makes the request idempotent, so the library's
  retry (exponential backoff on 408/429/5xx and dropped connections) may repeat it safely.
- A 412 answer means the object appeared meanwhile: another uploader of the same content, or
  our own earlier attempt whose response was lost. Its checksums decide: identical bytes count
  as already present; anything else is replaced, guarded by its generation.
- Files above `resumable_threshold` (8 MiB, the library's own limit for a single multipart
  request) go through a resumable session in `chunk_size` pieces; a failed chunk is retried and
  the session resumes instead of starting over. The default chunk is the library's own default,
  100 MiB: every chunk is a round trip, and small chunks made uploads several times slower than
  the plain library call. A chunk is held in memory while it is sent, and progress is reported
  per chunk.
- The object's crc32c/md5 as GCS reports them are compared with the local file after every
  upload, and the file's sha256 is recorded as custom metadata (`sha256`) for later reuse checks.
  The same comparison settles an upload whose last answer was lost: if the object is in place
  with the file's checksums, the upload succeeded.
- Callers that hashed the file already (staging does, to name the object) pass its digests in,
  so the file is read once for hashing and once for sending.

With STORAGE_EMULATOR_HOST set (fake-gcs-server in tests), the client talks to the emulator with
anonymous credentials, so no Application Default Credentials lookup happens.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from aiptrain._storage.base import (
    LocalDigests,
    ObjectInfo,
    ProgressCallback,
    digest_file,
    split_gs_uri,
)
from aiptrain.errors import AiptrainError, NotFound, OperationalError, PermissionDenied, UsageError

if TYPE_CHECKING:
    from google.api_core.retry import Retry

MiB = 1024 * 1024
# Resumable chunks must be a multiple of 256 KiB.
_CHUNK_GRANULE = 256 * 1024
# google-cloud-storage's default for resumable uploads (blob._DEFAULT_CHUNKSIZE).
DEFAULT_CHUNK_SIZE = 100 * MiB
# Above this a file goes through a resumable session (the library's _MAX_MULTIPART_SIZE).
DEFAULT_RESUMABLE_THRESHOLD = 8 * MiB
# Upload attempts per object: a 412 (the object changed under us) or a corrupted transfer
# starts a new round; each round has its own request-level retries.
_UPLOAD_ROUNDS = 5
_CORRUPTION_RETRIES = 2

_SHA256_METADATA_KEY = "sha256"


class GcsObjectStore:
    """An ObjectStore backed by Google Cloud Storage (or an emulator via STORAGE_EMULATOR_HOST)."""

    kind: ClassVar[str] = "gcs"
    root: ClassVar[None] = None  # the objects are not files here

    def __init__(
        self,
        project: str | None = None,
        client: Any = None,
        *,
        resumable_threshold: int = DEFAULT_RESUMABLE_THRESHOLD,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        retry_initial_delay: float = 1.0,
        retry_max_delay: float = 32.0,
        retry_timeout: float = 300.0,
        request_timeout: float = 120.0,
    ) -> None:
        if chunk_size <= 0 or chunk_size % _CHUNK_GRANULE:
            raise ValueError(f"chunk_size must be a positive multiple of {_CHUNK_GRANULE}")
        self.project = project
        self.resumable_threshold = resumable_threshold
        self.chunk_size = chunk_size
        self.retry_initial_delay = retry_initial_delay
        self.retry_max_delay = retry_max_delay
        self.retry_timeout = retry_timeout
        self.request_timeout = request_timeout
        self._client = client
        self._client_lock = threading.Lock()

    # -- ObjectStore ---------------------------------------------------------------------------

    def stat(self, uri: str) -> ObjectInfo | None:
        bucket_name, name = _object_name(uri)
        try:
            blob = self._bucket(bucket_name).get_blob(
                name, retry=self._retry(), timeout=self.request_timeout
            )
        except Exception as exc:
            _translate(exc, bucket_name, f"reading {uri}")
        return None if blob is None else _info(uri, blob)

    def upload(
        self,
        local: Path,
        uri: str,
        *,
        progress: ProgressCallback | None = None,
        digests: LocalDigests | None = None,
    ) -> ObjectInfo:
        """Upload `local` to `uri`; the object's checksums, as GCS reports them, must match the
        file's (`digests` when the caller knows them, else the file is hashed first)."""
        bucket_name, name = _object_name(uri)
        if not local.is_file():
            raise UsageError(f"cannot upload {local}: not a file")
        if digests is None:
            digests = digest_file(local)
        generation = 0  # create only
        corrupted = 0
        for _ in range(_UPLOAD_ROUNDS):
            try:
                uploaded = self._send(local, bucket_name, name, digests, generation, progress)
            except Exception as exc:
                if _is_data_corruption(exc) and corrupted < _CORRUPTION_RETRIES:
                    # The bytes that arrived differ from the file (the library has already tried
                    # to delete the bad object): start over with a fresh session.
                    corrupted += 1
                    generation = self._generation_to_replace(uri)
                    continue
                if not _is_precondition_failure(exc):
                    landed = self._stat_quietly(uri)
                    if landed is not None and landed.matches(digests):
                        # The request that completed the upload got through, but its answer was
                        # lost (a dropped connection; a server that forgot the finished session):
                        # the object is there, and its checksums say it is this file.
                        return landed
                    _translate(exc, bucket_name, f"uploading {local} to {uri}")
                existing = self.stat(uri)
                if existing is not None and existing.matches(digests):
                    return dataclasses.replace(existing, already_present=True)
                # Gone meanwhile (create again), or same name with other bytes, a partial or
                # foreign object: replace exactly that generation, so a concurrent writer's newer
                # object is never clobbered blindly.
                generation = (existing.generation or 0) if existing is not None else 0
                continue
            info = _info(uri, uploaded)
            if info.matches(digests):
                return info
            if corrupted >= _CORRUPTION_RETRIES:
                self._delete_quietly(bucket_name, name, info.generation)
                raise OperationalError(
                    f"the upload of {local} to {uri} kept arriving corrupted (size or checksum "
                    "differ from the local file); the bad object was removed",
                    hint="run the command again; if it keeps happening, check proxies on the path",
                )
            corrupted += 1
            generation = info.generation or 0
        raise OperationalError(
            f"{uri} kept changing while uploading {local}; another process is writing it",
            hint="stop the other writer or use another --staging-bucket",
        )

    def download(self, uri: str, local: Path) -> None:
        bucket_name, name = _object_name(uri)
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=f".{local.name}.", suffix=".partial")
        os.close(fd)
        try:
            blob = self._bucket(bucket_name).blob(name)
            blob.download_to_filename(tmp, retry=self._retry(), timeout=self.request_timeout)
            os.replace(tmp, local)
        except Exception as exc:
            Path(tmp).unlink(missing_ok=True)
            if _status(exc) == 404:
                raise NotFound(
                    f"{uri} does not exist", hint=f"list what is there: gcloud storage ls gs://{bucket_name}"
                ) from exc
            _translate(exc, bucket_name, f"downloading {uri}")

    # -- internals -----------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = _make_client(self.project)
            return self._client

    def _bucket(self, name: str) -> Any:
        return self.client.bucket(name)

    def _stat_quietly(self, uri: str) -> ObjectInfo | None:
        try:
            return self.stat(uri)
        except AiptrainError:
            return None  # the error being handled is the one worth reporting

    def _generation_to_replace(self, uri: str) -> int:
        existing = self.stat(uri)
        return (existing.generation or 0) if existing is not None else 0

    def _retry(self) -> Retry:
        from google.cloud.storage.retry import DEFAULT_RETRY  # type: ignore[import-untyped]

        retry: Retry = DEFAULT_RETRY.with_delay(
            initial=self.retry_initial_delay, maximum=self.retry_max_delay, multiplier=2.0
        ).with_timeout(self.retry_timeout)
        return retry

    def _send(
        self,
        local: Path,
        bucket_name: str,
        name: str,
        digests: LocalDigests,
        generation: int,
        progress: ProgressCallback | None,
    ) -> Any:
        resumable = digests.size > self.resumable_threshold
        # A blob with a chunk size always goes through a resumable session; without one the
        # library sends files up to 8 MiB in a single multipart request.
        blob = self._bucket(bucket_name).blob(name, chunk_size=self.chunk_size if resumable else None)
        blob.metadata = {_SHA256_METADATA_KEY: digests.sha256}
        with local.open("rb") as raw:
            stream = _ProgressReader(raw, digests.size, progress)
            blob.upload_from_file(
                stream,
                size=digests.size,
                content_type=_content_type(local),
                if_generation_match=generation,
                # Retrying writes is safe only because every write carries a generation
                # precondition (see the module docstring).
                retry=self._retry(),
                checksum="auto",
                timeout=self.request_timeout,
            )
            stream.finish()
        return blob

    def _delete_quietly(self, bucket_name: str, name: str, generation: int | None) -> None:
        try:
            self._bucket(bucket_name).blob(name).delete(if_generation_match=generation)
        except Exception:  # noqa: S110 - best effort; the checksum error is what matters
            pass


class _ProgressReader:
    """A seekable binary reader that reports how far the uploader has read.

    The uploader reads one chunk just before sending it (the whole file for small uploads), and
    seeks back when a resumable session resumes, so the position is the progress.
    """

    def __init__(self, raw: Any, total: int, progress: ProgressCallback | None) -> None:
        self._raw = raw
        self._total = total
        self._progress = progress
        self._reported = -1

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._raw.read(size)
        if data:
            self._report(min(self._raw.tell(), self._total))
        return data

    def finish(self) -> None:
        self._report(self._total)

    def _report(self, position: int) -> None:
        if self._progress is not None and position != self._reported:
            self._reported = position
            self._progress(position, self._total)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        position: int = self._raw.seek(offset, whence)
        return position

    def tell(self) -> int:
        position: int = self._raw.tell()
        return position


def _make_client(project: str | None) -> Any:
    try:
        from google.cloud import storage  # type: ignore[import-untyped, unused-ignore]

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            from google.auth.credentials import AnonymousCredentials

            anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]
            return storage.Client(project=project, credentials=anonymous)
        return storage.Client(project=project)
    except Exception as exc:
        _translate(exc, None, "connecting to Cloud Storage")


def _object_name(uri: str) -> tuple[str, str]:
    bucket, name = split_gs_uri(uri)
    if not name or name.endswith("/"):
        raise UsageError(f"{uri!r} names no object", hint="write it as gs://BUCKET/path/to/file")
    return bucket, name


def _content_type(path: Path) -> str:
    kind, encoding = mimetypes.guess_type(path.name)
    if encoding == "gzip":
        # Never declare Content-Encoding: GCS would then gunzip the archive on download.
        return "application/gzip"
    return kind or "application/octet-stream"


def _info(uri: str, blob: Any) -> ObjectInfo:
    metadata = blob.metadata or {}
    return ObjectInfo(
        uri=uri,
        size=int(blob.size or 0),
        sha256=metadata.get(_SHA256_METADATA_KEY),
        crc32c=blob.crc32c,
        md5=blob.md5_hash,
        generation=int(blob.generation) if blob.generation is not None else None,
    )


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind a Google exception, if there is one."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def _is_precondition_failure(exc: BaseException) -> bool:
    return _status(exc) == 412


def _is_data_corruption(exc: BaseException) -> bool:
    from google.cloud.storage.exceptions import DataCorruption  # type: ignore[import-untyped]

    return isinstance(exc, DataCorruption)


def _first_line(exc: BaseException) -> str:
    """The server's own error message when there is one, else the exception's first line."""
    message = _server_message(exc) or str(getattr(exc, "message", None) or exc or type(exc).__name__)
    lines = message.strip().splitlines() or [type(exc).__name__]
    return lines[0][:300]


def _server_message(exc: BaseException) -> str | None:
    """`error.message` from a GCS JSON error body, if the exception carries the response."""
    response = getattr(exc, "response", None)
    try:
        payload = response.json() if response is not None else None
        message = payload["error"]["message"] if isinstance(payload, dict) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        message = None
    if message:
        return str(message)
    errors = getattr(exc, "errors", None)
    if isinstance(errors, list) and errors and isinstance(errors[0], dict) and errors[0].get("message"):
        return str(errors[0]["message"])
    return None


def _unwrap_retry(exc: BaseException) -> tuple[BaseException, str]:
    """A retry that ran out of time: the last underlying error, and a note saying we retried."""
    from google.api_core.exceptions import RetryError

    if isinstance(exc, RetryError) and exc.cause is not None:
        return exc.cause, f"gave up after retrying ({_first_line(exc)}); last error: "
    return exc, ""


def _translate(exc: BaseException, bucket: str | None, action: str) -> NoReturn:
    """Raise the aiptrain error for a Google (or transport) exception; never returns."""
    if isinstance(exc, AiptrainError):
        raise exc
    from google.auth import exceptions as auth_exceptions

    exc, retried = _unwrap_retry(exc)
    where = f"gs://{bucket}" if bucket else "the bucket"
    if isinstance(exc, auth_exceptions.DefaultCredentialsError):
        raise PermissionDenied(
            "no Google credentials found for Cloud Storage",
            hint="run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS",
        ) from exc
    if isinstance(exc, auth_exceptions.RefreshError):
        raise PermissionDenied(
            f"Google credentials were refused while {action}: {_first_line(exc)}",
            hint="run `gcloud auth application-default login` again",
        ) from exc
    status = _status(exc)
    if status == 404 and bucket:
        raise NotFound(
            f"bucket gs://{bucket} does not exist",
            hint=f"create it with `gcloud storage buckets create gs://{bucket}` "
            f"(or `gsutil mb gs://{bucket}`), or pass another --staging-bucket",
        ) from exc
    if status in (401, 403):
        raise PermissionDenied(
            f"permission denied on {where} while {action}: {_first_line(exc)}",
            hint="grant the account roles/storage.objectAdmin on the bucket "
            f"(gcloud storage buckets add-iam-policy-binding {where} --member=... "
            "--role=roles/storage.objectAdmin)",
        ) from exc
    detail = f"HTTP {status}: " if status is not None and status >= 400 else ""
    raise OperationalError(
        f"Cloud Storage failed while {action}: {retried}{detail}{_first_line(exc)}",
        hint="check the network connection and try again; the upload is safe to repeat",
    ) from exc
