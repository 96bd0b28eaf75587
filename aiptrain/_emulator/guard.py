"""Who may talk to the emulator: checks made on every request before any route runs.

`local serve` can start processes, so a request must prove it comes from a client on this machine
that was meant to use it, not from a web page the developer happens to have open:

- `Host` must be a loopback name (localhost, 127.0.0.0/8, [::1]) or the address the server was
  told to bind: a DNS-rebound name (evil.example resolving to 127.0.0.1) is refused, so a page
  cannot read jobs or logs through the browser either. On the proxied port only (where `proxy`
  hands on what clients sent to Google's names), a Google host the proxy serves is taken too.
- An `Origin` header, which browsers add to cross-site requests, must be this server itself;
  no CORS header is ever sent, so no other origin can read an answer.
- With a token, `Authorization: Bearer <token>` (401 otherwise, compared in constant time). The
  console's pages take the session cookie the token was exchanged for instead (`tokens`); a
  console request without one, or with `?token=`, goes to the console's login (`ConsoleGate`).
- POST, PUT and PATCH bodies must be `application/json` (415 otherwise): a browser form can send
  `text/plain`, `application/x-www-form-urlencoded` and `multipart/form-data` cross-site
  without a preflight, never JSON.
- Only the methods the API has; OPTIONS (a CORS preflight), TRACE and the rest get 405.

Every refusal is Google's JSON error object. The guard is plain ASGI middleware around the whole
app, so it holds for routes that do not exist too.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from aiptrain._emulator.errors import ApiError
from aiptrain._emulator.google_hosts import destination
from aiptrain._emulator.tokens import session_cookie_name, session_is_valid
from aiptrain._loopback import is_loopback_host

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ALLOWED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_BODY_METHODS = ("POST", "PUT", "PATCH")
_JSON_TYPES = ("application/json",)


def split_host_header(value: str) -> str:
    """The name part of a Host header: `h:8080` -> `h`, `[::1]:8080` -> `[::1]`."""
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end != -1 else value
    name, _, _port = value.partition(":")
    return name


class ConsoleGate(Protocol):
    """The console's side of the token check (`console.login`)."""

    def covers(self, path: str) -> bool:
        """A console path: its session cookie authenticates it."""

    def public(self, path: str) -> bool:
        """An asset anyone may fetch (the login page's stylesheet): no token asked."""

    async def login(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a console request that has no session, or brings `?token=` to exchange for one."""


class RequestGuard:
    """ASGI middleware: the checks in this module's docstring, in that order."""

    def __init__(self, app: ASGIApp, *, token: str | None, bind_host: str, console: ConsoleGate | None = None,
                 proxied_port: int | None = None) -> None:
        self.app = app
        self.token = token
        self.bind_host = bind_host.strip("[]").lower()
        self.console = console
        self.proxied_port = proxied_port  # the port `proxy` hands requests for Google's names to

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path = str(scope.get("path", ""))
        console = self.console if self.console is not None and self.console.covers(path) else None
        session = _cookie(headers, session_cookie_name(_port(scope, headers))) if console else None
        public = self.console is not None and self.console.public(path)
        server = scope.get("server")
        proxied = self.proxied_port is not None and server is not None and server[1] == self.proxied_port
        refusal = self.refusal(scope["method"], headers, console_session=session, public=public, proxied=proxied)
        exchanging = console is not None and self.token is not None and _asks_token_exchange(scope)
        if console is not None and (exchanging or (refusal is not None and refusal.status == "UNAUTHENTICATED")):
            await console.login(scope, receive, send)
            return
        if refusal is not None:
            await send_error(send, refusal)
            return
        await self.app(scope, receive, send)

    def refusal(self, method: str, headers: dict[str, str], *, console_session: str | None = None,
                public: bool = False, proxied: bool = False) -> ApiError | None:
        host = headers.get("host", "")
        if not self._host_allowed(host, proxied=proxied):
            shown = host[:100] or "(none)"
            return ApiError("INVALID_ARGUMENT", f"Host {shown!r} is not a name of this aiptrain emulator: "
                            "use http://127.0.0.1:PORT/ or http://localhost:PORT/.")
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{host}":
            return ApiError("PERMISSION_DENIED", f"Cross-origin requests are refused (Origin {origin[:100]!r}): "
                            "the aiptrain emulator answers its own pages and command-line clients only.")
        if self.token is not None and not public and not self._session_valid(console_session):
            sent = headers.get("authorization", "")
            if not hmac.compare_digest(sent.encode(), f"Bearer {self.token}".encode()):
                return ApiError("UNAUTHENTICATED", "Request is missing a valid authentication credential: send "
                                "`Authorization: Bearer <token>` (the token `aiptrain local serve` wrote, see its "
                                "first lines).", headers={"WWW-Authenticate": 'Bearer realm="aiptrain"'})
        if method not in ALLOWED_METHODS:
            return ApiError("INVALID_ARGUMENT", f"Method {method[:20]} is not allowed.", http_code=405,
                            headers={"Allow": ", ".join(ALLOWED_METHODS)})
        if method in _BODY_METHODS and _has_body(headers):
            media_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if media_type not in _JSON_TYPES:
                shown = media_type[:100] or "none"
                return ApiError("INVALID_ARGUMENT", f"Unsupported Content-Type {shown!r}: request bodies must "
                                "be JSON (Content-Type: application/json).", http_code=415)
        return None

    def _session_valid(self, session: str | None) -> bool:
        return session is not None and self.token is not None and session_is_valid(self.token, session)

    def _host_allowed(self, host: str, *, proxied: bool) -> bool:
        name = split_host_header(host).strip("[]").lower()
        if not name:
            return False
        if proxied and destination(name) is not None:
            return True
        return is_loopback_host(name) or name == self.bind_host


def _headers(scope: Scope) -> dict[str, str]:
    """Header name -> value; a header sent twice keeps its first value except `host`, which
    must be unambiguous (h11 already refuses two)."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").lower()
        headers.setdefault(name, raw_value.decode("latin-1"))
    return headers


def _port(scope: Scope, headers: dict[str, str]) -> int:
    """The port the request came in on (the cookie's name carries it)."""
    server = scope.get("server")
    if server and server[1] is not None:
        return int(server[1])
    _name, _, port = headers.get("host", "").rpartition(":")
    return int(port) if port.isdigit() else 80


def _asks_token_exchange(scope: Scope) -> bool:
    """`?token=...` on a console URL: the URL printed at start, to be exchanged for a cookie."""
    from urllib.parse import parse_qs

    return "token" in parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"), keep_blank_values=True)


def _cookie(headers: dict[str, str], name: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() != "0"
    return "transfer-encoding" in headers


async def send_error(send: Send, error: ApiError) -> None:
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json; charset=UTF-8"), (b"content-length", str(len(body)).encode())]
    headers += [(name.lower().encode(), value.encode()) for name, value in error.headers.items()]
    await send({"type": "http.response.start", "status": error.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
