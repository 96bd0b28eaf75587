"""`aiptrain local serve`: run the emulator with uvicorn until interrupted.

It listens on loopback by default. Any other address exposes every job and every file of the
local store to the network, so it is refused unless the caller opts in (`allow_remote`) and
keeps the bearer token. The token is on by default (`tokens`): without `auth=False` a server
started without one makes one up and writes it where local clients find it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain._emulator.faults import FaultPlan
from aiptrain._loopback import is_loopback_host
from aiptrain.errors import OperationalError, UsageError

if TYPE_CHECKING:
    from aiptrain._backends.local.job_engine import LocalJobEngine


def check_bind(host: str, *, allow_remote: bool, token: str | None) -> None:
    if is_loopback_host(host):
        return
    if not allow_remote:
        raise UsageError(f"refusing to serve on {host}: it is not a loopback address",
                         hint="keep the default --host 127.0.0.1, or pass --allow-remote with --token-file")
    if not token:
        raise UsageError(f"serving on {host} needs a token that clients must send",
                         hint="pass --token-file FILE (or set AIPTRAIN_SERVE_TOKEN); clients set AIPTRAIN_API_TOKEN")


def read_token_file(path: Path) -> str:
    """The token in the first line of `path`; a usage error naming the file if there is none."""
    try:
        with path.open("rb") as stream:
            first = stream.readline(4096)
    except OSError as error:
        raise UsageError(f"--token-file: cannot read {path}: {error.strerror or error}") from None
    try:
        token = first.decode("utf-8").strip()
    except UnicodeDecodeError:
        token = ""
    if not token or not token.isprintable():
        raise UsageError(f"--token-file: {path} holds no token on its first line",
                         hint="write the token (printable text) as the file's first line")
    return token


def base_url(host: str, port: int) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return f"http://{shown}:{port}/"


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free port, read back from the socket)."""
    bare = host.strip("[]")
    try:
        info = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise UsageError(f"cannot resolve --host {host}: {error}") from None
    sock = socket.socket(info[0], socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(info[4])
    except OSError as error:
        sock.close()
        raise OperationalError(f"cannot listen on {host}:{port}: {error.strerror or error}",
                               hint="choose another --port (0 picks a free one)") from None
    sock.listen(128)
    return sock


def console_url(url: str, token: str | None) -> str:
    """The console's address with the token to exchange for a session, as a notebook server prints it."""
    from urllib.parse import quote

    return f"{url}?token={quote(token, safe='')}" if token else url


@dataclass
class ShuttingDown:
    """Whether the server is shutting down (uvicorn's `should_exit`, set on SIGINT or SIGTERM): it
    waits for open connections, so the console's event streams must end when they see it."""

    server: Any = None

    def is_set(self) -> bool:
        return bool(self.server is not None and self.server.should_exit)


@dataclass(frozen=True)
class Served:
    """What a listening server tells its caller."""

    url: str  # the base URL, with the real port
    token_file: Path | None  # where its token is kept (None: it asks for no token)
    grpc_address: str | None = None  # host:port of the aiplatform v1 gRPC services (None: not served)
    grpc_certificate: Path | None = None  # the certificate gRPC clients trust (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)
    grpc_missing: bool = False  # gRPC was asked for but grpcio / google-cloud-aiplatform are not installed
    console: str = ""  # the console's URL, with the token to exchange for a session cookie


def serve(
    host: str,
    port: int,
    *,
    allow_remote: bool,
    token: str | None,
    home: Path | None,
    auth: bool = True,
    faults: FaultPlan | None = None,
    on_ready: Callable[[Served], None] | None = None,
    grpc_port: int | None = None,
) -> None:
    """Serve until interrupted. `on_ready` is called once listening.

    grpc_port: also serve the aiplatform v1 job and pipeline services over gRPC (TLS) on this port
               (0: a free one), when grpcio and google-cloud-aiplatform are installed; None: not.
    token: the bearer token clients must send; None with `auth` (the default): a new random one.
    auth:  False serves without a token (`--no-auth`); `token` must then be None.
    Fault injection comes from `faults` or, when not given, $AIPTRAIN_EMULATOR_FAULTS (tests only).
    """
    from aiptrain._emulator.tokens import new_token, remove_token_file, write_token_file

    if not auth and token:
        raise UsageError("--no-auth cannot be combined with a token", hint="drop --no-auth or the token")
    if auth and not token:
        token = new_token()
    check_bind(host, allow_remote=allow_remote, token=token)
    import uvicorn

    from aiptrain._backends.local.job_engine import LocalJobEngine
    from aiptrain._backends.local.supervisor_start import allow_forking
    from aiptrain._emulator.app import create_app
    from aiptrain._emulator.limits import UVICORN_LIMITS, GuardedH11Protocol
    from aiptrain._gcs_endpoint.service import UPSTREAM_VARIABLE

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        # Clients stage into that GCS emulator: the jobs (their supervisors inherit this) read
        # and write it too, instead of the local store.
        os.environ[UPSTREAM_VARIABLE] = os.environ["STORAGE_EMULATOR_HOST"]
    allow_forking(False)  # a long-lived, threaded server execs its jobs' supervisors
    engine = LocalJobEngine(home=home)
    stopping = ShuttingDown()
    app = create_app(engine, token=token, bind_host=host, faults=faults or FaultPlan.from_environment(),
                     stopping=stopping)
    sock = bind_socket(host, port)
    actual_port = int(sock.getsockname()[1])
    grpc_server, grpc_served = None, Served("", None, grpc_missing=grpc_port is not None)
    try:
        token_file = write_token_file(token, actual_port, home) if token else None
        if grpc_port is not None:
            grpc_server, grpc_served = _start_grpc(engine, host, grpc_port, token)
    except BaseException:
        sock.close()
        if grpc_server is not None:
            grpc_server.stop(grace=None)
        raise
    # The token stays in this process: supervisors and trainers never inherit it.
    os.environ.pop("AIPTRAIN_SERVE_TOKEN", None)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            http=GuardedH11Protocol, **UVICORN_LIMITS)
    server = uvicorn.Server(config)
    stopping.server = server
    try:
        if on_ready is not None:
            url = base_url(host, actual_port)
            on_ready(Served(url, token_file, grpc_served.grpc_address, grpc_served.grpc_certificate,
                            grpc_served.grpc_missing, console_url(url, token)))
        server.run(sockets=[sock])
    finally:
        sock.close()
        if grpc_server is not None:
            grpc_server.stop(grace=None)
        if token_file is not None and token is not None:
            remove_token_file(token_file, token)


def _start_grpc(engine: LocalJobEngine, host: str, port: int, token: str | None) -> tuple[Any, Served]:
    """The gRPC port (aiptrain._emulator.grpc_api), or nothing when its packages are missing."""
    from aiptrain._emulator import grpc_api

    if not grpc_api.available():
        return None, Served("", None, grpc_missing=True)
    from aiptrain._emulator.services import make_services

    services = make_services(engine)
    identity = grpc_api.grpc_identity(services.storage_root.parent)
    server, bound = grpc_api.start_grpc_server(services, host=host, port=port, token=token, identity=identity)
    if not bound:
        server.stop(grace=None)
        raise OperationalError(f"cannot listen for gRPC on {host}:{port}", hint="choose another --grpc-port")
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return server, Served("", None, f"{shown}:{bound}", identity.certificate_path)
