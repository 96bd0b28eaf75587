"""`aiptrain local serve`: run the emulator with uvicorn until interrupted.

It listens on loopback by default. Any other address exposes every job and every file of the
local store to the network, so it is refused unless the caller opts in (`allow_remote`) and
keeps the bearer token. The token is on by default (`tokens`): without `auth=False` a server
started without one makes one up and writes it where local clients find it, with a Google
credentials file that carries it beside it.

With `proxy` (the default), it also starts its HTTPS proxy (`proxy`) on loopback, which answers
Google's host names with this server, a storage endpoint over the local store for Cloud Storage,
and writes the record `aiptrain local env` reads (`client_env`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiptrain._backends import DEFAULT_LOCAL_PROJECT
from aiptrain._emulator.faults import FaultPlan
from aiptrain._loopback import is_loopback_host
from aiptrain.errors import OperationalError, UsageError

if TYPE_CHECKING:
    from aiptrain._backends.local.job_engine import LocalJobEngine
    from aiptrain._emulator.ray_runner import RayRunner


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
class JobsOn:
    """Where the server's jobs run: this machine, or a Ray cluster (`on_ray`) with its settings."""

    on_ray: bool = False
    ray_address: str | None = None
    ray_resource_scale: float | None = None


@dataclass(frozen=True)
class Served:
    """What a listening server tells its caller."""

    url: str  # the base URL, with the real port
    token_file: Path | None  # where its token is kept (None: it asks for no token)
    grpc_address: str | None = None  # host:port of the aiplatform v1 gRPC services (None: not served)
    grpc_certificate: Path | None = None  # the certificate gRPC clients trust (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)
    grpc_missing: bool = False  # gRPC was asked for but grpcio / google-cloud-aiplatform are not installed
    console: str = ""  # the console's URL, with the token to exchange for a session cookie
    credentials_file: Path | None = None  # the authorized_user file carrying the token (google-auth)
    proxy_port: int | None = None  # the HTTPS proxy for Google's host names (None: --no-proxy)
    ray_address: str | None = None  # the Ray cluster the jobs run on (None: this machine)
    ray_silent: str | None = None  # why that cluster did not answer at the start (None: it did)


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
    proxy: bool = True,
    project: str = DEFAULT_LOCAL_PROJECT,
    jobs_on: JobsOn | None = None,
) -> None:
    """Serve until interrupted. `on_ready` is called once listening.

    grpc_port: also serve the aiplatform v1 job and pipeline services over gRPC (TLS) on this port
               (0: a free one), when grpcio and google-cloud-aiplatform are installed; None: not.
    token: the bearer token clients must send; None with `auth` (the default): a new random one.
    auth:  False serves without a token (`--no-auth`); `token` must then be None.
    proxy: also start the HTTPS proxy for Google's host names (`aiptrain local env` prints its
           environment); `project` is the project that environment names.
    jobs_on: where the jobs run (default: this machine); on Ray, a relay of this server runs them
             there and keeps their records here (`ray_runner`).
    Fault injection comes from `faults` or, when not given, $AIPTRAIN_EMULATOR_FAULTS (tests only).
    """
    from aiptrain._emulator.tokens import new_token

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

    _jobs_use_storage_emulator()
    allow_forking(False)  # a long-lived, threaded server execs its jobs' supervisors
    runner = _ray_runner(jobs_on, home, project)
    engine = LocalJobEngine(home=home, runner=runner)
    stopping = ShuttingDown()
    # What the proxy hands requests for Google's names to: a port of its own, so that the guard
    # takes those names as Host there and nowhere else.
    opened = _Closers()
    proxied_sock = opened.socket(bind_socket("127.0.0.1", 0)) if proxy else None
    proxied_port = int(proxied_sock.getsockname()[1]) if proxied_sock is not None else None
    app: Any = create_app(engine, token=token, bind_host=host, faults=faults or FaultPlan.from_environment(),
                          stopping=stopping, proxied_port=proxied_port)
    sock = opened.socket(bind_socket(host, port))
    actual_port = int(sock.getsockname()[1])
    url = base_url(host, actual_port)
    grpc_served = Served("", None, grpc_missing=grpc_port is not None)
    front: _ProxyFront | None = None
    try:
        ray_silent = _start_runner(opened, runner, engine)
        token_file, credentials = _write_token(opened, token, actual_port, home)
        if grpc_port is not None:
            grpc_served = _start_grpc(opened, engine, host, grpc_port, token)
        if proxied_port is not None:
            front = _ProxyFront.start(engine, app, proxied_port=proxied_port, token=token, bind_host=host,
                                      grpc=grpc_served)
            opened.add(front.stop)
            app = front.app
            front.record(actual_port, url, project=project, token_file=token_file, credentials=credentials,
                         home=home)
    except BaseException:
        opened.close()
        raise
    # The token stays in this process: supervisors and trainers never inherit it.
    os.environ.pop("AIPTRAIN_SERVE_TOKEN", None)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            http=GuardedH11Protocol, **UVICORN_LIMITS)
    server = uvicorn.Server(config)
    stopping.server = server
    try:
        if on_ready is not None:
            on_ready(Served(url, token_file, grpc_served.grpc_address, grpc_served.grpc_certificate,
                            grpc_served.grpc_missing, console_url(url, token), credentials,
                            front.proxy_port if front is not None else None,
                            runner.address if runner is not None else None, ray_silent))
        server.run(sockets=[sock] if proxied_sock is None else [sock, proxied_sock])
    finally:
        opened.close()


def _ray_runner(jobs_on: JobsOn | None, home: Path | None, project: str) -> RayRunner | None:
    """The relay that runs the jobs on Ray (None: they run here); usage errors for a missing Ray,
    a malformed address or scale, found before anything listens."""
    if jobs_on is None or not jobs_on.on_ray:
        return None
    from aiptrain._backends.base import BackendSettings
    from aiptrain._backends.ray.client import require_ray
    from aiptrain._backends.ray.settings import resource_scale
    from aiptrain._emulator.ray_runner import RayRunner
    from aiptrain._paths import aiptrain_home

    require_ray()
    try:
        resource_scale(jobs_on.ray_resource_scale)
    except UsageError as error:
        raise UsageError(f"--ray-resource-scale: {error.message}", hint=error.hint) from None
    settings = BackendSettings(project=project, home=home, ray_address=jobs_on.ray_address,
                               ray_resource_scale=jobs_on.ray_resource_scale)
    return RayRunner(home if home is not None else aiptrain_home(), settings)


def _jobs_use_storage_emulator() -> None:
    from aiptrain._gcs_endpoint.service import UPSTREAM_VARIABLE

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        # Clients stage into that GCS emulator: the jobs (their supervisors inherit this) read
        # and write it too, instead of the local store.
        os.environ[UPSTREAM_VARIABLE] = os.environ["STORAGE_EMULATOR_HOST"]


def _start_runner(opened: _Closers, runner: RayRunner | None, engine: LocalJobEngine) -> str | None:
    """Start the Ray relay, if there is one; why its cluster does not answer yet, if it does not."""
    if runner is None:
        return None
    silent = runner.reachable()
    runner.start(engine.store)
    opened.add(runner.stop)
    return silent


def _write_token(opened: _Closers, token: str | None, port: int, home: Path | None) -> tuple[Path | None, Path]:
    """The token file (None: no token is asked for) and the credentials file beside it, which a
    server without a token writes too (with a token it takes no notice of), so that clients of
    `aiptrain local env` find credentials either way."""
    from aiptrain._emulator.tokens import credential_token, remove_token_file, write_credentials_file, write_token_file

    if not token:
        credentials = write_credentials_file(credential_token(None), port, home)
        opened.add(lambda: credentials.unlink(missing_ok=True))
        return None, credentials
    token_file = write_token_file(token, port, home)
    opened.add(lambda: remove_token_file(token_file, token))
    return token_file, write_credentials_file(token, port, home)


class _Closers:
    """What the server opened, closed in the reverse order (on a failed start as on the way out)."""

    def __init__(self) -> None:
        self._closers: list[Callable[[], None]] = []

    def add(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def socket(self, sock: socket.socket) -> socket.socket:
        self.add(sock.close)
        return sock

    def close(self) -> None:
        """Close everything, even when one closer fails (its error is raised once all ran)."""
        failure: BaseException | None = None
        while self._closers:
            try:
                self._closers.pop()()
            except BaseException as error:  # the rest must still be closed
                failure = failure or error
        if failure is not None:
            raise failure


class _ProxyFront:
    """The proxy, the storage endpoint it hands Cloud Storage to, and the record `local env` reads."""

    def __init__(self, app: Any, proxy: Any, storage: Any, authority: Any) -> None:
        self.app = app
        self.proxy = proxy
        self.storage = storage
        self.authority = authority
        self.proxy_port = 0
        self.written: Any = None
        self.home: Path | None = None

    @classmethod
    def start(cls, engine: LocalJobEngine, app: Any, *, proxied_port: int, token: str | None, bind_host: str,
              grpc: Served) -> _ProxyFront:
        import threading

        from aiptrain._emulator.proxied_hosts import ProxiedHosts
        from aiptrain._emulator.proxy import Backends, ConnectProxy, ProxyCredentials, Upstream
        from aiptrain._emulator.proxy_ca import ProxyAuthority
        from aiptrain._emulator.services import make_services
        from aiptrain._emulator.tokens import credential_token, refresh_token_for
        from aiptrain._gcs_endpoint.api import StorageServer
        from aiptrain._gcs_endpoint.service import UPSTREAM_VARIABLE, store_buckets

        services = make_services(engine)
        home = services.storage_root.parent
        storage = StorageServer(store_buckets(home, services.storage_root, os.environ.get(UPSTREAM_VARIABLE)), None)
        threading.Thread(target=storage.serve_forever, kwargs={"poll_interval": 0.2}, name="serve-storage",
                         daemon=True).start()
        grpc_backend = None
        if grpc.grpc_address is not None:
            grpc_host, _, grpc_port = grpc.grpc_address.rpartition(":")
            grpc_backend = ("127.0.0.1" if grpc_host.strip("[]") in ("0.0.0.0", "::") else grpc_host.strip("[]"),
                            int(grpc_port))
        backends = Backends(api=("127.0.0.1", proxied_port), storage=("127.0.0.1", storage.server_address[1]),
                            grpc=grpc_backend, grpc_certificate=grpc.grpc_certificate)
        authority = ProxyAuthority(home)
        proxy = ConnectProxy(credentials=ProxyCredentials.new(), authority=authority, backends=backends,
                             upstream=Upstream.from_environment(dict(os.environ)))
        wrapped = ProxiedHosts(app, proxied_port=proxied_port, token=token,
                               refresh_token=refresh_token_for(credential_token(token)), projects=services.projects,
                               bind_host=bind_host)
        front = cls(wrapped, proxy, storage, authority)
        try:
            front.proxy_port = proxy.start()
        except BaseException:
            storage.shutdown()
            storage.server_close()
            raise
        return front

    def record(self, port: int, url: str, *, project: str, token_file: Path | None, credentials: Path,
               home: Path | None) -> None:
        from aiptrain._emulator.client_env import ServerRecord, write_record

        self.written = ServerRecord(
            port=port, url=url, project=project, proxy_port=self.proxy_port,
            proxy_username=self.proxy.credentials.username, proxy_password=self.proxy.credentials.password,
            ca_bundle=str(self.authority.write_bundle()), credentials=str(credentials),
            token_file=str(token_file) if token_file is not None else None)
        self.home = home
        write_record(self.written, home)

    def stop(self) -> None:
        from aiptrain._emulator.client_env import remove_record

        if self.written is not None:
            remove_record(self.written, self.home)
        self.proxy.stop()
        self.storage.shutdown()
        self.storage.server_close()


def _start_grpc(opened: _Closers, engine: LocalJobEngine, host: str, port: int, token: str | None) -> Served:
    """The gRPC port (aiptrain._emulator.grpc_api), or nothing when its packages are missing."""
    from aiptrain._emulator import grpc_api

    if not grpc_api.available():
        return Served("", None, grpc_missing=True)
    from aiptrain._emulator.services import make_services

    services = make_services(engine)
    identity = grpc_api.grpc_identity(services.storage_root.parent)
    server, bound = grpc_api.start_grpc_server(services, host=host, port=port, token=token, identity=identity)
    opened.add(lambda: server.stop(grace=None))
    if not bound:
        raise OperationalError(f"cannot listen for gRPC on {host}:{port}", hint="choose another --grpc-port")
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    return Served("", None, f"{shown}:{bound}", identity.certificate_path)
