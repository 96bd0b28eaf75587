"""The VM's metadata server, one per job: what a trainer's Google libraries asked the service's VM.

On AI Platform Training a replica ran on a Compute Engine VM whose metadata server answered
`google.auth.default()` (credentials of the job's service account, and the project),
`storage.Client()`, gsutil's `service_account = default` and TensorFlow's GCS client. Here each job
gets one on 127.0.0.1, served from a thread of the process that runs the job, beside its storage
endpoint:

- `/computeMetadata/v1/project/project-id`, `numeric-project-id`, `attributes/`;
- `/computeMetadata/v1/instance/zone`, `region`, `id`, `hostname`, `name`, `attributes/`;
- `/computeMetadata/v1/instance/service-accounts/` (`default` and the account's email): `email`,
  `aliases`, `scopes`, `token`, and the directories with `?recursive=true`;
- `/` answers 200 with `Metadata-Flavor: Google`, the ping google-auth and gsutil detect a VM by.

Requests under `/computeMetadata/` must carry `Metadata-Flavor: Google` and no `X-Forwarded-For`,
as on the VM. The service account is `trainingInput.serviceAccount`, else the service's own agent
(`service-PROJECT_NUMBER@cloud-ml.google.com.iam.gserviceaccount.com`); the zone is the job's
region's (`Catalog.zone_of`). Tokens are random strings the job's storage endpoint accepts
(`TokenBook`), and nothing else does: no Google service, no other job's endpoint.

Clients find the server through variables (`metadata_variables`): google-auth reads GCE_METADATA_HOST
(its first releases: GCE_METADATA_ROOT) and pings GCE_METADATA_IP; oauth2client, gcloud and apitools
read GCE_METADATA_ROOT. gsutil's boto plugin and TensorFlow 1.x know only
`http://metadata.google.internal` and `http://metadata`: they reach the server through the job's
storage endpoint, which is their `http_proxy` too and hands proxy requests for those names to
`answer` (gsutil takes `http_proxy` for HTTPS as well, so it must be the storage endpoint). Only
processes of the job's own user are served (`peer`): another user's connection is told so by one
thread of its own (`_Refusals`) as it is accepted, and never gets a handler thread of the process
that runs the job; a handler whose client says nothing for `IDLE_SECONDS` hangs up.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiptrain._gcs_endpoint.peer import served_peer
from aiptrain._job.catalog import Catalog
from aiptrain._job.project_id import project_number_for

METADATA_HOSTS = ("metadata.google.internal", "metadata", "169.254.169.254")
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
TOKEN_SECONDS = 3600
# A token stays good this long past its expiry: a client refreshes shortly before, not after.
_GRACE_SECONDS = 300
_STRANGER = ("This metadata server serves only the processes of the job that runs it (the user that started it); "
             "your process belongs to another user.")
# A connection that sends nothing for this long is closed: an idle client holds no thread forever.
IDLE_SECONDS = 30.0
# Another user's connections waiting to be told no, and how long each may take to read the answer.
_REFUSALS_WAITING = 32
_REFUSAL_SECONDS = 1.0


class TokenBook:
    """The access tokens a job's metadata server issued; the job's storage endpoint accepts these only."""

    def __init__(self) -> None:
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self, seconds: float = TOKEN_SECONDS) -> str:
        token = "aiptrain." + secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._expiry = {t: end for t, end in self._expiry.items() if end > now}  # forget the stale
            self._expiry[token] = now + seconds + _GRACE_SECONDS
        return token

    def accepts(self, token: str) -> bool:
        with self._lock:
            end = self._expiry.get(token)
        return end is not None and end > time.monotonic()


@dataclass(frozen=True)
class VmIdentity:
    """What the job's VM was: its project, zone and service account."""

    project_id: str
    project_number: str
    zone: str  # e.g. us-central1-a
    service_account: str
    instance_id: str
    hostname: str
    scopes: tuple[str, ...] = SCOPES

    @property
    def region(self) -> str:
        return self.zone.rsplit("-", 1)[0]


def vm_identity(project: str, job_id: str, region: str | None, service_account: str | None,
                catalog: Catalog) -> VmIdentity:
    """The VM a job of `project` in `region` ran on: its zone, its service account (the job's, else
    the service's agent), a stable instance ID and a Compute Engine host name derived from the job."""
    number = project_number_for(project)
    zone = catalog.zone_of(region or "us-central1")
    digest = hashlib.sha256(f"{project}/{job_id}".encode()).digest()
    name = "cmle-training-" + (re.sub(r"[^a-z0-9]+", "-", job_id.lower()).strip("-")[:40] or "job")
    return VmIdentity(project_id=project, project_number=number, zone=zone,
                      service_account=service_account or default_service_account(number),
                      instance_id=str(int.from_bytes(digest[:8], "big") % 10**19),
                      hostname=f"{name}.{zone}.c.{project.replace(':', '.')}.internal")


def default_service_account(project_number: str) -> str:
    """The service's own agent, which ran jobs that named no service account."""
    return f"service-{project_number}@cloud-ml.google.com.iam.gserviceaccount.com"


def metadata_variables(address: str) -> dict[str, str]:
    """The variables that lead every client library to a metadata server at `address` (HOST:PORT)."""
    return {
        "GCE_METADATA_HOST": address,
        "GCE_METADATA_ROOT": address,
        "GCE_METADATA_IP": address,
    }


@dataclass(frozen=True)
class _Answer:
    status: int
    body: str
    json: bool = False


class MetadataServer(ThreadingHTTPServer):
    """The server, started on a free port of 127.0.0.1 by `start()`; `close()` stops it."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, identity: VmIdentity, tokens: TokenBook | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.identity = identity
        self.tokens = tokens or TokenBook()
        self.owner_uid = os.getuid()
        self._refusals = _Refusals(_STRANGER + "\n")
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="metadata-server", daemon=True)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A handler thread for the job's own user; another user's connection goes to `_Refusals`."""
        if served_peer(self.server_address, client_address, self.owner_uid):
            super().process_request(request, client_address)
        else:
            self._refusals.refuse(request)

    def start(self) -> MetadataServer:
        self._thread.start()
        return self

    @property
    def address(self) -> str:
        """HOST:PORT, what the variables name."""
        host, port = self.server_address[:2]
        return f"{host!s}:{port}"

    def environment(self) -> dict[str, str]:
        return metadata_variables(self.address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)
        self._refusals.close()

    def __enter__(self) -> MetadataServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def respond(self, handler: BaseHTTPRequestHandler, request: urllib.parse.SplitResult, *,
                head: bool = False) -> None:
        """Answer a GET (or HEAD) for `request` (a path, or a proxy request's URL) on `handler`'s
        connection: the storage endpoint's proxy hands requests for the metadata hosts here."""
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(request.query).items()}
        headers = {key.lower(): value for key, value in handler.headers.items()}
        _send(handler, self.answer(request.path, query, headers), head=head)

    # -- what the VM answered ----------------------------------------------------------------

    def answer(self, path: str, query: dict[str, str], headers: dict[str, str]) -> _Answer:
        if path in ("", "/"):
            return _Answer(200, "computeMetadata/\n")
        parts = [p for p in path.split("/") if p]
        if parts[:1] != ["computeMetadata"]:
            return _Answer(404, "Not Found\n")
        if headers.get("metadata-flavor", "") != "Google" or "x-forwarded-for" in headers:
            return _Answer(403, "Missing required header: Metadata-Flavor: Google (and no X-Forwarded-For).\n")
        if parts == ["computeMetadata"]:
            return _Answer(200, "v1/\n")
        node = self._lookup(parts[1:])
        return node if isinstance(node, _Answer) else _rendered(node, recursive=query.get("recursive") == "true")

    def _lookup(self, parts: list[str]) -> Any:
        """The entry at `parts` (after `computeMetadata`), its value computed; or an _Answer (404)."""
        if parts[:1] != ["v1"]:
            return _Answer(404, "Not Found\n")
        node: Any = self._tree()
        for part in parts[1:]:
            if not isinstance(node, dict) or part not in node:
                return _Answer(404, "Not Found\n")
            node = node[part]
        if isinstance(node, _Missing):
            return _Answer(404, "Identity tokens are not issued by a local job's metadata server.\n")
        return node() if callable(node) else node

    def _tree(self) -> dict[str, Any]:
        vm = self.identity
        account = {
            "aliases": ["default"],
            "email": vm.service_account,
            "scopes": list(vm.scopes),
            "token": self._token,
            "identity": _Missing(),
        }
        return {
            "project": {"project-id": vm.project_id, "numeric-project-id": vm.project_number, "attributes": {}},
            "universe": {"universe-domain": "googleapis.com"},
            "instance": {
                "id": vm.instance_id,
                "hostname": vm.hostname,
                "name": vm.hostname.split(".", 1)[0],
                "zone": f"projects/{vm.project_number}/zones/{vm.zone}",
                "region": f"projects/{vm.project_number}/regions/{vm.region}",
                "attributes": {},
                "service-accounts": {"default": account, vm.service_account: account},
            },
        }

    def _token(self) -> _Json:
        return _Json({"access_token": self.tokens.issue(), "expires_in": TOKEN_SECONDS - 1, "token_type": "Bearer"})


@dataclass(frozen=True)
class _Json:
    value: dict[str, Any]


class _Missing(dict[str, Any]):
    """An entry the VM had that is not served here (identity tokens): a 404."""


def _rendered(node: Any, *, recursive: bool) -> _Answer:
    """An entry as the VM's server answers it: a directory lists its entries (or, recursive, is
    JSON), a list has a line per item."""
    if isinstance(node, dict):
        if recursive:
            return _Answer(200, json.dumps(_resolved(node)), json=True)
        return _Answer(200, "".join(f"{key}/\n" if isinstance(value, dict) else f"{key}\n"
                                    for key, value in node.items()))
    if isinstance(node, (list, tuple)):
        return _Answer(200, "".join(f"{item}\n" for item in node))
    if isinstance(node, _Json):
        return _Answer(200, json.dumps(node.value), json=True)
    return _Answer(200, str(node))


def _resolved(node: dict[str, Any]) -> dict[str, Any]:
    """A directory with `?recursive=true`: every leaf's value (tokens are not listed)."""
    found: dict[str, Any] = {}
    for key, value in node.items():
        if callable(value) or isinstance(value, _Missing):
            continue
        found[key] = _resolved(value) if isinstance(value, dict) else value
    return found


class _Refusals:
    """Tells other users' connections that they are not served, one at a time on one thread: a 403
    written at once, then up to `_REFUSAL_SECONDS` for the client to read it and hang up (closing on
    an unread request would reset the connection before the answer is read). However many such
    connections come, they cost this one thread and `_REFUSALS_WAITING` sockets; the rest are closed
    unanswered."""

    def __init__(self, text: str) -> None:
        payload = text.encode()
        self._answer = (b"HTTP/1.1 403 Forbidden\r\nMetadata-Flavor: Google\r\nContent-Type: application/text\r\n"
                        b"Connection: close\r\nContent-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        self._waiting: queue.Queue[socket.socket | None] = queue.Queue(_REFUSALS_WAITING)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def refuse(self, connection: socket.socket) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="metadata-refusals", daemon=True)
                self._thread.start()
        try:
            self._waiting.put_nowait(connection)
        except queue.Full:
            connection.close()

    def _run(self) -> None:
        while (connection := self._waiting.get()) is not None:
            with contextlib.suppress(OSError), connection:
                connection.settimeout(_REFUSAL_SECONDS)
                connection.sendall(self._answer)
                connection.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + _REFUSAL_SECONDS
                while time.monotonic() < deadline and connection.recv(65536):
                    pass

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        while True:  # whoever still waits is closed unanswered
            try:
                waiting = self._waiting.get_nowait()
            except queue.Empty:
                break
            if waiting is not None:
                waiting.close()
        self._waiting.put(None)
        thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: MetadataServer
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(IDLE_SECONDS)  # a silent client is hung up on (handle_one_request)

    def do_GET(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_POST(self) -> None:
        self._refuse(405, "The metadata server takes GET requests.\n")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def do_CONNECT(self) -> None:
        self._refuse(403, f"aiptrain: {self.path} is not reachable through the job's metadata server. Put the host in "
                     "NO_PROXY to reach it directly.\n")

    def _serve(self, *, head: bool = False) -> None:
        split = urllib.parse.urlsplit(self.path)
        if split.scheme and (split.hostname or "").lower() not in METADATA_HOSTS:
            self._refuse(403, f"aiptrain: {split.netloc} is not the metadata server.\n")
            return
        self.server.respond(self, split, head=head)

    def _refuse(self, status: int, text: str) -> None:
        self.close_connection = True
        _send(self, _Answer(status, text))


def _send(handler: BaseHTTPRequestHandler, answer: _Answer, *, head: bool = False) -> None:
    payload = answer.body.encode()
    handler.send_response(answer.status)
    handler.send_header("Metadata-Flavor", "Google")
    handler.send_header("Content-Type", "application/json" if answer.json else "application/text")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    if not head:
        handler.wfile.write(payload)

