"""`local serve`'s HTTPS proxy: Google's host names answered by the emulator, everything else tunnelled.

Clients that take no endpoint setting (Airflow's hooks, Vertex Pipelines' launcher, the Vertex AI
SDK told only a project, gcloud) all honour `https_proxy` / `grpc_proxy` and open a tunnel with
`CONNECT host:443`. For a host in `google_hosts`, the proxy answers the tunnel itself: it shows a
certificate for exactly that name (`proxy_ca`) and passes the decrypted stream on, unchanged, to
what serves it:

- REST (HTTP/1.1) to the emulator's proxied port, where the same app and guard answer (the guard
  takes Google's names as Host there only);
- gRPC (ALPN `h2`, aiplatform's hosts) to the emulator's gRPC port, over TLS again;
- Cloud Storage to a storage endpoint over the local store (`gcs_endpoint.api`).

Another `*.googleapis.com` name gets 501 naming the host and what is served; any other host is
tunnelled unchanged, through the proxy this process had in its environment (this machine's own,
for PyPI) if any. Every request must carry the proxy's credentials (`Proxy-Authorization: Basic`,
in the proxy URL `aiptrain local env` prints, readable by this user only): 407 otherwise. A
connection from another user's process is refused (403) before it is read, as the storage
endpoint refuses it (`gcs_endpoint.peer`): credentials that leaked are still no use to them.

It is an asyncio server in a thread of its own: a tunnel costs two sockets and two small tasks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import logging
import os
import secrets
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from aiptrain._emulator.google_hosts import SERVED_DESCRIPTION, Destination, carries_grpc, destination, is_google_host
from aiptrain._emulator.proxy_ca import ProxyAuthority
from aiptrain._gcs_endpoint.peer import served_peer

LOG = logging.getLogger("aiptrain._emulator.proxy")
PROXY_USER = "aiptrain"
_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT_SECONDS = 30.0
_CONNECT_TIMEOUT_SECONDS = 30.0
_BLOCK = 256 * 1024


@dataclass(frozen=True)
class ProxyCredentials:
    username: str
    password: str

    @classmethod
    def new(cls) -> ProxyCredentials:
        return cls(PROXY_USER, secrets.token_urlsafe(24))

    def accepts(self, header: str | None) -> bool:
        scheme, _, encoded = (header or "").strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            sent = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(sent, f"{self.username}:{self.password}".encode())


@dataclass(frozen=True)
class Backends:
    """Where the decrypted streams go."""

    api: tuple[str, int]  # the emulator's proxied port (plain HTTP)
    storage: tuple[str, int] | None = None  # the storage endpoint (plain HTTP); None: storage refused
    grpc: tuple[str, int] | None = None  # the gRPC port (TLS); None: gRPC not served
    grpc_certificate: Path | None = None  # what the gRPC port shows (self-signed)


@dataclass(frozen=True)
class Upstream:
    """The proxy this process's environment named for HTTPS, through which other hosts are tunnelled."""

    host: str
    port: int
    authorization: str | None  # a Proxy-Authorization header value, from the URL's credentials
    no_proxy: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls, environ: dict[str, str]) -> Upstream | None:
        url = environ.get("https_proxy") or environ.get("HTTPS_PROXY")
        if not url:
            return None
        split = urlsplit(url if "://" in url else f"http://{url}")
        if not split.hostname:
            return None
        authorization = None
        if split.username is not None:
            pair = f"{unquote(split.username)}:{unquote(split.password or '')}".encode()
            authorization = "Basic " + base64.b64encode(pair).decode()
        no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
        names = tuple(name.strip().lower().lstrip("*").lstrip(".") for name in no_proxy.split(",") if name.strip())
        return cls(split.hostname, split.port or 80, authorization, names)

    def bypassed(self, host: str) -> bool:
        name = host.lower()
        return any(name == entry or name.endswith("." + entry) for entry in self.no_proxy if entry)


class ConnectProxy:
    """The proxy; `start()` listens on loopback and returns the port, `stop()` ends every tunnel."""

    def __init__(self, *, credentials: ProxyCredentials, authority: ProxyAuthority, backends: Backends,
                 upstream: Upstream | None) -> None:
        self.credentials = credentials
        self.authority = authority
        self.backends = backends
        self.upstream = upstream
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="serve-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._grpc_client: ssl.SSLContext | None = None
        self._owner = os.getuid()
        if backends.grpc is not None and backends.grpc_certificate is not None:
            client = ssl.create_default_context(cafile=str(backends.grpc_certificate))
            client.set_alpn_protocols(["h2"])
            self._grpc_client = client

    def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.authority.ensure()
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, host, port, limit=_HEAD_LIMIT), self._loop)
        self._server = future.result(timeout=10)
        return int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        if not self._thread.is_alive():
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    # -- one client connection ---------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_client(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ssl.SSLError, OSError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("proxy connection failed")
        finally:
            writer.close()

    async def _serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not served_peer(writer.get_extra_info("sockname"), writer.get_extra_info("peername"), self._owner):
            await _answer(writer, 403, "Forbidden", "aiptrain local serve's proxy serves its own user only.")
            return
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_SECONDS)
        lines = head.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        target = rest.rpartition(" ")[0] or rest
        headers = {name.strip().lower(): value.strip()
                   for name, _, value in (line.partition(":") for line in lines[1:] if line)}
        if not self.credentials.accepts(headers.get("proxy-authorization")):
            await _answer(writer, 407, "Proxy Authentication Required",
                          "aiptrain local serve's proxy needs its credentials: use the proxy URL "
                          "`aiptrain local env` prints (it carries them).",
                          extra='Proxy-Authenticate: Basic realm="aiptrain local serve"\r\n')
            return
        if method != "CONNECT":
            await _answer(writer, 405, "Method Not Allowed",
                          f"aiptrain local serve's proxy only opens tunnels (CONNECT), not {method[:20]} requests.")
            return
        host, port = _host_port(target)
        if host is None:
            await _answer(writer, 400, "Bad Request", f"CONNECT needs HOST:PORT, not {target[:100]!r}.")
            return
        where = destination(host)
        if (where is None and is_google_host(host)) or (where is not None and port != 443):
            await _answer(writer, 501, "Not Implemented",
                          f"aiptrain local serve does not answer {host}:{port}, and does not pass Google's hosts on "
                          f"to Google. It serves (port 443): {SERVED_DESCRIPTION}.")
            return
        if where is None:
            await self._tunnel(reader, writer, host, port)
            return
        await self._terminate(reader, writer, host, where)

    async def _terminate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str,
                         where: Destination) -> None:
        grpc = carries_grpc(host) and self._grpc_client is not None
        context = self.authority.server_context(host, ("h2", "http/1.1") if grpc else ("http/1.1",))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.wait_for(writer.start_tls(context), _HEAD_TIMEOUT_SECONDS)
        secured = writer.get_extra_info("ssl_object")
        if grpc and secured is not None and secured.selected_alpn_protocol() == "h2":
            assert self.backends.grpc is not None
            grpc_host, grpc_port = self.backends.grpc
            back_reader, back_writer = await asyncio.open_connection(
                grpc_host, grpc_port, ssl=self._grpc_client, server_hostname="localhost")
        elif where is Destination.STORAGE:
            if self.backends.storage is None:
                return
            back_reader, back_writer = await asyncio.open_connection(*self.backends.storage)
        else:
            back_reader, back_writer = await asyncio.open_connection(*self.backends.api)
        await _splice(reader, writer, back_reader, back_writer)

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, port: int) -> None:
        upstream = self.upstream if self.upstream is not None and not self.upstream.bypassed(host) else None
        try:
            if upstream is None:
                back_reader, back_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), _CONNECT_TIMEOUT_SECONDS)
            else:
                back_reader, back_writer = await asyncio.wait_for(
                    asyncio.open_connection(upstream.host, upstream.port), _CONNECT_TIMEOUT_SECONDS)
                authorization = f"Proxy-Authorization: {upstream.authorization}\r\n" if upstream.authorization else ""
                back_writer.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n{authorization}\r\n"
                                  .encode("latin-1"))
                answer = await asyncio.wait_for(back_reader.readuntil(b"\r\n\r\n"), _CONNECT_TIMEOUT_SECONDS)
                status = answer.split(b" ", 2)[1:2]
                if status != [b"200"]:
                    back_writer.close()
                    writer.write(answer)  # the upstream's refusal, as it gave it
                    await writer.drain()
                    return
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
            await _answer(writer, 502, "Bad Gateway", f"cannot reach {host}:{port}: {error}")
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await _splice(reader, writer, back_reader, back_writer)


def _host_port(target: str) -> tuple[str | None, int]:
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None, 0
    return host, int(port)


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str, message: str, *, extra: str = "") -> None:
    body = (message + "\n").encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n".encode("latin-1") + body)
    await writer.drain()


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  back_reader: asyncio.StreamReader, back_writer: asyncio.StreamWriter) -> None:
    """Copy both ways until either side closes; then close both."""
    for stream in (writer, back_writer):
        sock = stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(6, 1, 1)  # TCP_NODELAY: a request's head and body go out as written

    async def copy(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
        try:
            while True:
                block = await source.read(_BLOCK)
                if not block:
                    break
                target.write(block)
                await target.drain()
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(Exception):
                if target.can_write_eof():
                    target.write_eof()
                else:
                    target.close()

    try:
        await asyncio.gather(copy(reader, back_writer), copy(back_reader, writer))
    finally:
        back_writer.close()
