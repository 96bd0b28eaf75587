"""The Cloud Storage API over the local store, as an HTTP server on 127.0.0.1 that is also the replicas' proxy.

One server, one port, two ways in:

- plain HTTP, for clients given `STORAGE_EMULATOR_HOST` (google-cloud-storage, gcsfs and so
  pandas): the JSON API (`/storage/v1/...`, `/upload/storage/v1/...`, `/download/storage/v1/...`);
- `CONNECT www.googleapis.com:443` / `storage.googleapis.com:443`, for clients that only know
  Google's hosts and honour `HTTPS_PROXY` (TensorFlow's GCS filesystem, through libcurl): TLS is
  terminated with the installation's certificate (`certificates.py`) and the same handler serves
  the requests inside, plus the path-style reads TensorFlow sends to storage.googleapis.com
  (`GET /BUCKET/OBJECT` with a Range). A CONNECT to any other host is refused (403): nothing a
  replica sends through this proxy leaves the machine;
- `GET http://metadata.google.internal/...` (`http://metadata/`, `http://169.254.169.254/`), for
  clients that only know the VM's metadata server by its name (gsutil's boto plugin, TensorFlow
  1.x) and honour `http_proxy`: handed to the job's metadata server (`metadata.py`). A plain-HTTP
  proxy request for another host is refused (403) likewise.

The part of the API served is what those clients use: bucket get/list/insert; object get
(metadata or media, with ranges), list (prefix, delimiter, pages), delete, patch, copy, rewrite,
compose; uploads (media, multipart, resumable in chunks, with `ifGenerationMatch`). Answers and
errors have the API's shapes; fields the local store cannot know (ACLs, owners) are left out.
Only processes of the user running the endpoint are served (`peer`); any other user's get 403.
A request with a bearer token is served when its job's metadata server issued the token
(`metadata.TokenBook`), else refused with 401; one without credentials is served (emulator clients
and `gcloud storage` with credentials disabled send none).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import secrets
import ssl
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from aiptrain._gcs_endpoint.certificates import STORAGE_HOSTS
from aiptrain._gcs_endpoint.metadata import METADATA_HOSTS, MetadataServer
from aiptrain._gcs_endpoint.objects import Buckets, ContentHashes, ObjectMeta, StorageError, with_hashes
from aiptrain._gcs_endpoint.peer import served_peer
from aiptrain._gcs_endpoint.transfer import BLOCK, body_blocks, send_range

_MAX_PAGE = 1000
# The User-Agent of a client that never reads an upload's answer: TensorFlow's GCS filesystem
# (`TSL` in recent releases, `TensorFlow/1.15.5` and the like before) checks the status only. Its
# uploads skip the MD5 (a third of the endpoint's work on an upload); whoever later asks for that
# object's hashes gets them.
_UNREAD_ANSWERS = re.compile(r"TSL|TensorFlow(/[\w.-]+)?")
_MAX_MULTIPART = 512 * 1024 * 1024
_STRANGER = ("This storage endpoint serves only the processes of the job that runs it (the user that "
             "started it); your process belongs to another user.")
_UNKNOWN_BEARER = ("This storage endpoint accepts the tokens of its job's metadata server only (or no credentials); "
                  "the request's bearer token is not one of them. Use google.auth.default() or the metadata server's "
                  "token (a key file's or another job's token does not work here).")


def _rfc3339(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def object_resource(meta: ObjectMeta, base: str) -> dict[str, Any]:
    quoted = urllib.parse.quote(meta.name, safe="")
    resource: dict[str, Any] = {
        "kind": "storage#object",
        "id": f"{meta.bucket}/{meta.name}/{meta.generation}",
        "selfLink": f"{base}/storage/v1/b/{meta.bucket}/o/{quoted}",
        "mediaLink": f"{base}/download/storage/v1/b/{meta.bucket}/o/{quoted}?generation={meta.generation}&alt=media",
        "name": meta.name,
        "bucket": meta.bucket,
        "generation": str(meta.generation),
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "size": str(meta.size),
        "timeCreated": _rfc3339(meta.updated_ns),
        "updated": _rfc3339(meta.updated_ns),
        "timeStorageClassUpdated": _rfc3339(meta.updated_ns),
        "etag": f"CL{meta.generation}",
    }
    if meta.crc32c is not None:
        resource["crc32c"] = meta.crc32c
    if meta.md5 is not None:
        resource["md5Hash"] = meta.md5
    return resource


def _names_hashes(fields: str) -> bool:
    """Whether a `fields` selection names the object hashes (TensorFlow's stat asks for
    `size,generation,updated` only, and pays nothing)."""
    return "md5Hash" in fields or "crc32c" in fields


def bucket_resource(bucket: str, base: str) -> dict[str, Any]:
    return {
        "kind": "storage#bucket", "id": bucket, "name": bucket, "selfLink": f"{base}/storage/v1/b/{bucket}",
        "projectNumber": "0", "metageneration": "1", "location": "US-CENTRAL1", "locationType": "region",
        "storageClass": "STANDARD", "etag": "CAE=",
        "timeCreated": "1970-01-01T00:00:00.000Z", "updated": "1970-01-01T00:00:00.000Z",
    }


@dataclass
class _Upload:
    """A resumable upload session: the bytes so far live in `path`."""

    bucket: str
    name: str
    path: Path
    total: int | None
    if_generation_match: int | None
    received: int = 0
    checksum: ContentHashes = field(default_factory=ContentHashes)
    lock: threading.Lock = field(default_factory=threading.Lock)


class StorageServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, buckets: Buckets, tls: ssl.SSLContext | None, metadata: MetadataServer | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.buckets = buckets
        self.tls = tls
        # The job's metadata server: its tokens are the bearer tokens served (None: any is taken),
        # and proxy requests for its host names go to it.
        self.metadata = metadata
        self.tokens = metadata.tokens if metadata is not None else None
        self.owner_uid = os.getuid()
        self.uploads: dict[str, _Upload] = {}
        self.uploads_lock = threading.Lock()
        # (bucket, name, generation, size) -> the object's metadata with its hashes
        self.hashed: dict[tuple[str, str, int, int], ObjectMeta] = {}

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request is no news; anything else goes to stderr."""
        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError, ssl.SSLError)):
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        with self.uploads_lock:
            for upload in self.uploads.values():
                upload.path.unlink(missing_ok=True)
            self.uploads.clear()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StorageServer
    timeout = 300
    # Headers and body go out in separate writes: with Nagle's algorithm the second waited for
    # the client's delayed ACK, 40 ms on every answer.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        pass  # replicas' storage traffic would drown the job log

    # -- who may ask (see `peer`) --------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.from_owner = served_peer(self.server.server_address, self.client_address, self.server.owner_uid)

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if not self.from_owner:  # another user's process: refused before the request is looked at
            return self._refused(403, "forbidden", _STRANGER)
        if self.command != "CONNECT" and not self._token_accepted():
            return self._refused(401, "authError", _UNKNOWN_BEARER)
        return True

    def _token_accepted(self) -> bool:
        tokens = self.server.tokens
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        return tokens is None or scheme.lower() != "bearer" or tokens.accepts(token.strip())

    def _refused(self, status: int, reason: str, message: str) -> bool:
        """Answer `status` without looking at the request; its body is dropped. False (for parse_request)."""
        self.close_connection = True
        length = self.headers.get("Content-Length", "")
        if length.isdigit() and int(length) <= BLOCK:
            self.rfile.read(int(length))
        self._json(status, {"error": {"code": status, "message": message, "errors": [
            {"domain": "global", "reason": reason, "message": message}]}})
        return False

    # -- the proxy -------------------------------------------------------------------------

    def do_CONNECT(self) -> None:
        host, _, port = self.path.rpartition(":")
        if host not in STORAGE_HOSTS or port != "443" or self.server.tls is None:
            self._plain(403, f"aiptrain: {self.path} is not reachable from a local job; only Cloud Storage "
                        f"({', '.join(STORAGE_HOSTS)}) is served, from the local store. Put the host in "
                        "NO_PROXY to reach it directly.")
            self.close_connection = True
            return
        # The bare status line: libcurl reads a proxy's answer a byte at a time.
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.close_connection = True
        try:
            secure = self.server.tls.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            return  # the client did not trust the certificate, or went away
        try:
            _TunnelledHandler(secure, self.client_address, self.server)
        finally:
            try:
                secure.unwrap()
            except (ssl.SSLError, OSError):
                pass

    # -- routing ---------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    @property
    def base(self) -> str:
        """How this client reaches us: `https://www.googleapis.com` through the proxy, else our address."""
        host = self.headers.get("Host") or self.server.endpoint.removeprefix("http://")
        return f"https://{host}" if isinstance(self.connection, ssl.SSLSocket) else f"http://{host}"

    def _dispatch(self, method: str) -> None:
        self.body_read = False
        split = urllib.parse.urlsplit(self.path)
        if split.scheme and not isinstance(self.connection, ssl.SSLSocket):  # a plain-HTTP proxy request
            self._proxied(method, split)
            return
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(split.query, keep_blank_values=True).items()}
        parts = split.path.split("/")[1:]
        try:
            if parts[:3] == ["storage", "v1", "b"]:
                self._json_api(method, parts[3:], query)
            elif parts[:4] == ["upload", "storage", "v1", "b"] and len(parts) == 6 and parts[5] == "o":
                self._upload(method, urllib.parse.unquote(parts[4]), query)
            elif parts[:4] == ["download", "storage", "v1", "b"] and len(parts) == 7 and parts[5] == "o":
                self._media(method, urllib.parse.unquote(parts[4]), urllib.parse.unquote(parts[6]))
            elif method in ("GET", "HEAD") and len(parts) >= 2 and parts[0]:
                # storage.googleapis.com/BUCKET/OBJECT, the path style TensorFlow reads with.
                self._media(method, urllib.parse.unquote(parts[0]), urllib.parse.unquote("/".join(parts[1:])))
            else:
                raise StorageError(404, "notFound", f"Not Found: {method} {split.path}")
        except StorageError as error:
            self._error(error)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _proxied(self, method: str, request: urllib.parse.SplitResult) -> None:
        """`GET http://HOST/...`: the metadata server's when HOST is one of its names, else refused."""
        self._drain()
        metadata = self.server.metadata
        if metadata is None or (request.hostname or "").lower() not in METADATA_HOSTS or method not in ("GET", "HEAD"):
            self.close_connection = True
            self._plain(403, f"aiptrain: http://{request.netloc} is not reachable from a local job; only Cloud "
                        f"Storage and the job's metadata server are served. Put the host in NO_PROXY to reach it "
                        "directly.")
            return
        metadata.respond(self, request, head=method == "HEAD")

    def _json_api(self, method: str, rest: list[str], query: dict[str, str]) -> None:
        buckets = self.server.buckets
        if not rest or rest == [""]:
            if method == "POST":
                body = self._json_body()
                name = str(body.get("name") or "")
                buckets.create_bucket(name)
                self._json(200, bucket_resource(name, self.base))
                return
            self._drain()
            items = [bucket_resource(name, self.base) for name in buckets.buckets()]
            self._json(200, {"kind": "storage#buckets", "items": items})
            return
        bucket = urllib.parse.unquote(rest[0])
        if len(rest) == 1:
            self._drain()
            buckets.bucket_path(bucket)
            self._json(200, bucket_resource(bucket, self.base))
            return
        if rest[1] != "o":
            raise StorageError(404, "notFound", "Not Found")
        if len(rest) == 2:
            self._drain()
            self._list(bucket, query)
            return
        name = urllib.parse.unquote(rest[2])
        action = rest[3:]
        if not action:
            if method in ("GET", "HEAD") and query.get("alt") == "media":
                self._media(method, bucket, name)
                return
            self._drain()
            if method == "DELETE":
                buckets.delete(bucket, name)
                self._empty(204)
                return
            meta = buckets.stat(bucket, name)
            if meta is None:
                raise StorageError(404, "notFound", f"No such object: {bucket}/{name}")
            # The whole resource, or fields naming a hash.
            fields = query.get("fields")
            if method == "GET" and (fields is None or _names_hashes(fields)) and not name.endswith("/"):
                meta = self._hashed(meta)
            self._json(200, object_resource(meta, self.base), head=method == "HEAD")
            return
        if method == "POST" and action[0] == "compose" and len(action) == 1:
            body = self._json_body()
            sources = [str(item.get("name")) for item in body.get("sourceObjects") or []]
            self._json(200, object_resource(buckets.compose(bucket, sources, name), self.base))
            return
        if method == "POST" and len(action) == 5 and action[0] in ("copyTo", "rewriteTo") and action[3] == "o":
            self._drain()
            meta = buckets.copy(bucket, name, urllib.parse.unquote(action[2]), urllib.parse.unquote(action[4]))
            resource = object_resource(meta, self.base)
            if action[0] == "copyTo":
                self._json(200, resource)
            else:
                self._json(200, {"kind": "storage#rewriteResponse", "totalBytesRewritten": str(meta.size),
                                 "objectSize": str(meta.size), "done": True, "resource": resource})
            return
        raise StorageError(404, "notFound", "Not Found")

    # -- listing ---------------------------------------------------------------------------

    def _list(self, bucket: str, query: dict[str, str]) -> None:
        prefix = query.get("prefix", "")
        delimiter = query.get("delimiter", "")
        try:
            size = min(int(query.get("maxResults") or _MAX_PAGE), _MAX_PAGE)
        except ValueError:
            raise StorageError(400, "invalid", f"Invalid value for maxResults: {query['maxResults']}") from None
        after = query.get("pageToken") or query.get("startOffset") or ""
        entries = [e for e in self.server.buckets.listing(bucket, prefix, delimiter)
                   if e[0].encode() > after.encode() or (not query.get("pageToken") and e[0] == after)]
        page, more = entries[:max(size, 1)], len(entries) > max(size, 1)
        # Only a listing that names the hashes gets them (gsutil's does): a plain one, as gcsfs
        # and google-cloud-storage send, would read every listed object.
        hashes = _names_hashes(query.get("fields", ""))
        items = [object_resource(self._hashed(meta) if hashes and not meta.name.endswith("/") else meta, self.base)
                 for _name, meta in page if meta is not None]
        prefixes = [name for name, meta in page if meta is None]
        answer: dict[str, Any] = {"kind": "storage#objects"}
        if items:
            answer["items"] = items
        if prefixes:
            answer["prefixes"] = prefixes
        if more:
            answer["nextPageToken"] = page[-1][0]
        self._json(200, answer)

    # -- media -----------------------------------------------------------------------------

    def _media(self, method: str, bucket: str, name: str) -> None:
        self._drain()
        with self.server.buckets.open(bucket, name) as (stream, meta):
            start, end = 0, meta.size  # [start, end)
            status = 200
            wanted = self.headers.get("Range")
            if wanted and wanted.startswith("bytes="):
                first, _, last = wanted.removeprefix("bytes=").split(",")[0].partition("-")
                try:
                    if first:
                        start = int(first)
                        end = min(int(last) + 1, meta.size) if last else meta.size
                    elif last:
                        start = max(meta.size - int(last), 0)
                except ValueError:
                    raise StorageError(400, "invalid", f"Invalid Range header: {wanted}") from None
                if (start >= meta.size > 0) or (meta.size == 0 and first and start > 0):
                    self.send_response(416, "Requested range not satisfiable")
                    self.send_header("Content-Range", f"bytes */{meta.size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206 if (start, end) != (0, meta.size) or meta.size == 0 else 200
            length = max(end - start, 0)
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("X-Goog-Generation", str(meta.generation))
            self.send_header("X-Goog-Stored-Content-Length", str(meta.size))
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{meta.size}")
            self.end_headers()
            if method == "HEAD":
                return
            send_range(self.connection, stream, start, length)

    # -- uploads ---------------------------------------------------------------------------

    def _upload(self, method: str, bucket: str, query: dict[str, str]) -> None:
        kind = query.get("uploadType", "")
        if method == "PUT" or (method == "POST" and query.get("upload_id")):
            self._resumable_chunk(query.get("upload_id", ""))
            return
        if method != "POST":
            raise StorageError(405, "methodNotAllowed", f"{method} is not allowed here")
        condition = _generation(query)
        if kind == "resumable":
            body = self._json_body()
            name = query.get("name") or str(body.get("name") or "")
            self.server.buckets.bucket_path(bucket)
            self.server.buckets.path(bucket, name)  # a bad name is refused now, not at the end
            total_text = self.headers.get("X-Upload-Content-Length")
            upload = _Upload(bucket, name, self.server.buckets.new_upload_file(),
                             int(total_text) if total_text and total_text.isdigit() else None, condition,
                             checksum=self._new_hashes())
            upload_id = secrets.token_urlsafe(18)
            with self.server.uploads_lock:
                self.server.uploads[upload_id] = upload
            location = (f"{self.base}/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?"
                        + urllib.parse.urlencode({"uploadType": "resumable", "name": name, "upload_id": upload_id}))
            self.send_response(200)
            self.send_header("Location", location)
            self.send_header("X-GUploader-UploadID", upload_id)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if kind == "multipart":
            name, data = self._multipart()
            name = query.get("name") or name
            temporary = self.server.buckets.new_upload_file()
            checksum = self._new_hashes()
            checksum.update(data)
            temporary.write_bytes(data)
        else:  # media (and a missing uploadType, which the API treats the same)
            name = query.get("name", "")
            temporary = self.server.buckets.new_upload_file()
            checksum = self._new_hashes()
            try:
                with temporary.open("wb") as out:
                    for block in self._body_blocks():
                        checksum.update(block)
                        out.write(block)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
        meta = self.server.buckets.commit(bucket, name, temporary, checksum.value(), condition)
        self._json(200, object_resource(self._remember_hashes(meta, checksum), self.base))

    def _resumable_chunk(self, upload_id: str) -> None:
        with self.server.uploads_lock:
            upload = self.server.uploads.get(upload_id)
        if upload is None:
            self._drain()
            raise StorageError(404, "notFound", "No such upload session (it may have completed or expired).")
        with upload.lock:
            content_range = self.headers.get("Content-Range", "")
            first: int | None = None
            if content_range.startswith("bytes "):
                span, _, total = content_range.removeprefix("bytes ").partition("/")
                if total.isdigit():
                    upload.total = int(total)
                if span != "*":
                    start = span.partition("-")[0]
                    if not start.isdigit():
                        raise StorageError(400, "invalid", f"Invalid Content-Range header: {content_range}")
                    first = int(start)
            if first is not None and first > upload.received:
                self._drain()  # past what arrived: not written; the answer says where to resume
            else:
                self._append_chunk(upload, upload.received - first if first is not None else 0)
            if not content_range:
                upload.total = upload.received  # one PUT with the whole object
            if upload.total is None or upload.received < upload.total:
                self.send_response(308, "Resume Incomplete")
                if upload.received:
                    self.send_header("Range", f"bytes=0-{upload.received - 1}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with self.server.uploads_lock:
                self.server.uploads.pop(upload_id, None)
            meta = self.server.buckets.commit(upload.bucket, upload.name, upload.path, upload.checksum.value(),
                                              upload.if_generation_match)
        self._json(200, object_resource(self._remember_hashes(meta, upload.checksum), self.base))

    def _append_chunk(self, upload: _Upload, skip: int) -> None:
        """Add the request's body to the session, but its first `skip` bytes (a client resending
        what already arrived). Every byte written is counted and hashed as it lands, so a chunk cut
        off midway leaves the file, the count the client is told (`Range`) and the hashes agreeing,
        and the client resumes from there."""
        with upload.path.open("ab") as out:
            for received in self._body_blocks():
                block = received[min(skip, len(received)):]
                skip -= len(received) - len(block)
                if block:
                    out.write(block)
                    upload.checksum.update(block)
                    upload.received += len(block)

    def _new_hashes(self) -> ContentHashes:
        """The hashes to compute for this request's upload: all but the MD5 for a client that never
        reads the answer (`_UNREAD_ANSWERS`); that object's MD5 is computed if anyone asks."""
        return ContentHashes(md5=not _UNREAD_ANSWERS.fullmatch(self.headers.get("User-Agent", "")))

    def _remember_hashes(self, meta: ObjectMeta, hashes: ContentHashes) -> ObjectMeta:
        """A new object's metadata with the hashes of the body just received; kept for later reads
        when both are known."""
        meta = dataclasses.replace(meta, md5=hashes.md5(), crc32c=meta.crc32c or hashes.value())
        if meta.md5 is not None:
            self.server.hashed[(meta.bucket, meta.name, meta.generation, meta.size)] = meta
        return meta

    def _hashed(self, meta: ObjectMeta) -> ObjectMeta:
        """The object's metadata with its hashes, computed once per version of the object."""
        key = (meta.bucket, meta.name, meta.generation, meta.size)
        found = self.server.hashed.get(key)
        if found is None:
            found = self.server.hashed[key] = with_hashes(self.server.buckets, meta)
        return found

    def _multipart(self) -> tuple[str, bytes]:
        content_type = self.headers.get("Content-Type", "")
        # Quoted either way: gsutil (apitools) sends boundary='===...==' and plain \n line ends.
        boundary = next((p.strip().removeprefix("boundary=").strip("\"'") for p in content_type.split(";")
                         if p.strip().startswith("boundary=")), "")
        if not boundary:
            raise StorageError(400, "invalid", "A multipart upload needs a boundary in its Content-Type")
        body = self._body_bytes(_MAX_MULTIPART)
        delimiter = b"--" + boundary.encode()
        parts = [part for part in body.split(delimiter)[1:] if not part.startswith(b"--")]
        if len(parts) < 2:
            raise StorageError(400, "invalid", "A multipart upload has a metadata part and a media part")
        sections = []
        for part in parts[:2]:
            newline = b"\r\n" if part.startswith(b"\r\n") else b"\n"
            _headers, _, content = part.removeprefix(newline).partition(newline * 2)
            sections.append(content.removesuffix(newline))
        try:
            metadata = json.loads(sections[0] or b"{}")
        except ValueError:
            raise StorageError(400, "invalid", "The metadata part of the upload is not JSON") from None
        return str(metadata.get("name") or ""), sections[1]

    # -- bodies ----------------------------------------------------------------------------

    def _body_blocks(self) -> Iterator[bytes]:
        self.body_read = True
        chunked = self.headers.get("Transfer-Encoding", "").lower() == "chunked"
        return body_blocks(self.rfile, self.headers.get("Content-Length"), chunked)

    def _body_bytes(self, limit: int) -> bytes:
        chunks, total = [], 0
        for block in self._body_blocks():
            total += len(block)
            if total > limit:
                raise StorageError(413, "uploadTooLarge", "Use a resumable upload for objects this large")
            chunks.append(block)
        return b"".join(chunks)

    def _drain(self) -> None:
        for _block in self._body_blocks():
            pass

    def _json_body(self) -> dict[str, Any]:
        raw = self._body_bytes(1024 * 1024)
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            raise StorageError(400, "parseError", "The request body is not JSON") from None
        return data if isinstance(data, dict) else {}

    # -- answers ---------------------------------------------------------------------------

    def _json(self, status: int, data: dict[str, Any], *, head: bool = False) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head:
            self.wfile.write(payload)

    def _empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _plain(self, status: int, text: str) -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _error(self, error: StorageError) -> None:
        has_body = self.headers.get("Transfer-Encoding") or int(self.headers.get("Content-Length") or 0) > 0
        if has_body and not self.body_read:
            self.close_connection = True  # its body was not read: the next request would start inside it
        self._json(error.status, {"error": {"code": error.status, "message": error.message, "errors": [
            {"domain": "global", "reason": error.reason, "message": error.message}]}})


class _TunnelledHandler(_Handler):
    """The requests inside a CONNECT tunnel: its connection's owner was checked when it opened."""

    def setup(self) -> None:
        BaseHTTPRequestHandler.setup(self)
        self.from_owner = True


def _generation(query: dict[str, str]) -> int | None:
    value = query.get("ifGenerationMatch")
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise StorageError(400, "invalid", f"Invalid value for ifGenerationMatch: {value}") from None
