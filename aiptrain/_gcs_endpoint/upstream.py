"""Buckets and objects kept by a Cloud Storage emulator instead of the local store.

A job created through `aiptrain local serve` whose client staged into a GCS emulator
(fake-gcs-server, `STORAGE_EMULATOR_HOST` of the server) reads and writes that emulator: its
replicas' google-cloud-storage and gcsfs talk to it directly, and TensorFlow's requests, which
only go to Google's hosts, reach it through the job's endpoint, which relays each operation here
as a JSON API call. Uploads are spooled to a local file first (the endpoint receives them in
chunks), then sent in one request.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from aiptrain._gcs_endpoint.objects import ObjectMeta, StorageError, not_found
from aiptrain._storage.local import local_path_for
from aiptrain.errors import UsageError

_TIMEOUT = 300.0
_BLOCK = 1024 * 1024


def _meta(resource: dict[str, Any]) -> ObjectMeta:
    updated = str(resource.get("updated") or "1970-01-01T00:00:00Z").replace("Z", "+00:00")
    moment = datetime.datetime.fromisoformat(updated)
    return ObjectMeta(
        bucket=str(resource["bucket"]), name=str(resource["name"]), size=int(resource.get("size") or 0),
        generation=int(resource.get("generation") or 1), updated_ns=int(moment.timestamp() * 1e9),
        crc32c=resource.get("crc32c"),
    )


class EmulatorBuckets:
    """The same operations as `DirectoryBuckets`, on a GCS emulator at `endpoint`."""

    def __init__(self, endpoint: str, spool: Path) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.spool = spool

    # -- HTTP --------------------------------------------------------------------------------

    def _call(self, method: str, path: str, query: dict[str, str] | None = None, *,
              body: bytes | BinaryIO | None = None, json_body: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None) -> Any:
        url = f"{self.endpoint}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        sent_headers = dict(headers or {})
        data: Any = body
        if json_body is not None:
            data = json.dumps(json_body).encode()
            sent_headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=sent_headers)  # noqa: S310
        try:
            return urllib.request.urlopen(request, timeout=_TIMEOUT)  # noqa: S310 - our own emulator
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")
            try:
                message = json.loads(detail)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = detail.strip() or error.reason
            reason = {404: "notFound", 409: "conflict", 412: "conditionNotMet"}.get(error.code, "backendError")
            raise StorageError(error.code, reason, str(message)) from None
        except OSError as error:
            raise StorageError(503, "backendError", f"the storage emulator {self.endpoint} is unreachable: "
                               f"{error}") from None

    def _json(self, method: str, path: str, query: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
        with self._call(method, path, query, **kwargs) as response:
            raw = response.read()
        return json.loads(raw) if raw.strip() else {}

    @staticmethod
    def _object_path(bucket: str, name: str) -> str:
        return f"/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(name, safe='')}"

    # -- names and buckets -------------------------------------------------------------------

    def path(self, bucket: str, name: str = "") -> Path:
        """Checks the names as the local store does (the same URIs are valid everywhere)."""
        try:
            return local_path_for(f"gs://{bucket}/{name}", Path("/"))
        except UsageError as error:
            raise StorageError(400, "invalid", error.message) from None

    def bucket_path(self, bucket: str) -> Path:
        return self.path(bucket)

    def buckets(self) -> list[str]:
        listing = self._json("GET", "/storage/v1/b", {"project": "local"})
        return sorted(str(item["name"]) for item in listing.get("items") or [])

    def create_bucket(self, bucket: str) -> None:
        self.path(bucket)
        self._json("POST", "/storage/v1/b", {"project": "local"}, json_body={"name": bucket})

    def _ensure_bucket(self, bucket: str) -> None:
        with contextlib.suppress(StorageError):
            self.create_bucket(bucket)  # a bucket is made on first write, as in the local store

    # -- reading -----------------------------------------------------------------------------

    def stat(self, bucket: str, name: str) -> ObjectMeta | None:
        self.path(bucket, name)
        if not name:
            return None
        try:
            return _meta(self._json("GET", self._object_path(bucket, name)))
        except StorageError as error:
            if error.status == 404:
                return None
            raise

    @contextlib.contextmanager
    def open(self, bucket: str, name: str) -> Iterator[tuple[BinaryIO, ObjectMeta]]:
        meta = self.stat(bucket, name)
        if meta is None:
            raise not_found(f"{bucket}/{name}")
        self.spool.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=self.spool) as copy:
            with self._call("GET", self._object_path(bucket, name), {"alt": "media"}) as response:
                while block := response.read(_BLOCK):
                    copy.write(block)
            copy.seek(0)
            yield copy, ObjectMeta(bucket, name, copy.seek(0, 2), meta.generation, meta.updated_ns, meta.crc32c)

    def listing(self, bucket: str, prefix: str, delimiter: str) -> list[tuple[str, ObjectMeta | None]]:
        self.path(bucket)
        entries: list[tuple[str, ObjectMeta | None]] = []
        query = {"prefix": prefix, "delimiter": delimiter, "maxResults": "1000"}
        while True:
            try:
                page = self._json("GET", f"/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o", query)
            except StorageError as error:
                if error.status == 404:
                    return []  # a bucket not written yet
                raise
            entries += [(str(item["name"]), _meta(item)) for item in page.get("items") or []]
            entries += [(str(folder), None) for folder in page.get("prefixes") or []]
            token = page.get("nextPageToken")
            if not token:
                break
            query["pageToken"] = str(token)
        entries.sort(key=lambda entry: entry[0].encode())
        return entries

    # -- writing -----------------------------------------------------------------------------

    def new_upload_file(self) -> Path:
        self.spool.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.spool, prefix="upload-")
        os.close(handle)
        return Path(temporary)

    def commit(self, bucket: str, name: str, source: Path, crc32c: str | None,
               if_generation_match: int | None = None) -> ObjectMeta:
        self.path(bucket, name)
        query = {"uploadType": "media", "name": name}
        if if_generation_match is not None:
            query["ifGenerationMatch"] = str(if_generation_match)
        self._ensure_bucket(bucket)
        try:
            with source.open("rb") as body:
                resource = self._json(
                    "POST", f"/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o", query, body=body,
                    headers={"Content-Type": "application/octet-stream",
                             "Content-Length": str(source.stat().st_size)})
        finally:
            source.unlink(missing_ok=True)
        meta = _meta(resource)
        return ObjectMeta(meta.bucket, meta.name, meta.size, meta.generation, meta.updated_ns, meta.crc32c or crc32c)

    def delete(self, bucket: str, name: str) -> None:
        self.path(bucket, name)
        with self._call("DELETE", self._object_path(bucket, name)):
            pass

    def copy(self, bucket: str, name: str, to_bucket: str, to_name: str) -> ObjectMeta:
        self.path(to_bucket, to_name)
        self._ensure_bucket(to_bucket)
        target = f"/b/{urllib.parse.quote(to_bucket, safe='')}/o/{urllib.parse.quote(to_name, safe='')}"
        return _meta(self._json("POST", self._object_path(bucket, name) + "/copyTo" + target, json_body={}))

    def compose(self, bucket: str, sources: list[str], name: str) -> ObjectMeta:
        body = {"sourceObjects": [{"name": source} for source in sources], "destination": {"name": name}}
        return _meta(self._json("POST", self._object_path(bucket, name) + "/compose", json_body=body))
