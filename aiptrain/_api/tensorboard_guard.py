"""TensorBoard behind the emulator's checks: run by the TensorBoard interpreter, not imported by aiptrain.

TensorBoard answers whoever reaches its port: another user of this machine, or a web page whose
name was rebound to 127.0.0.1. `aiptrain jobs tensorboard` therefore starts it through this
script, which wraps TensorBoard's own WSGI app before its server starts:

- `Host` must be a loopback name (localhost, 127.0.0.0/8, [::1]); an `Origin`, when sent, must be
  the server itself;
- every request must prove it comes from the user who started it: the token the command printed
  in its URL (`?token=`, given once: the answer sets an HttpOnly, SameSite=Strict cookie named
  after the port and signed with the token, and the page reloads without the token) or
  `Authorization: Bearer TOKEN`. The token comes in the environment (`TOKEN_VARIABLE`), which other
  users cannot read, and is new at every start.

It runs in whatever interpreter has TensorBoard, the job's own (Python 3.7 and later), where
aiptrain is not importable: hence it imports nothing from aiptrain and has its own short loopback
rule. Usage: `python -c SOURCE ARGS...` (not the file's path: its folder on sys.path would make
`tensorboard` this package's `tensorboard.py`), ARGS being TensorBoard's own.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import sys
from typing import Any
from urllib.parse import parse_qsl

TOKEN_VARIABLE = "AIPTRAIN_TENSORBOARD_TOKEN"  # noqa: S105 (the variable's name, not a token)
COOKIE_PREFIX = "aiptrain-tensorboard-"
_HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
            ("Referrer-Policy", "no-referrer"), ("X-Content-Type-Options", "nosniff"),
            ("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")]


def loopback_name(name: str) -> bool:
    name = name.strip("[]").lower()
    if name in ("localhost", "::1") or name.endswith(".localhost"):
        return True
    parts = name.split(".")
    return len(parts) == 4 and parts[0] == "127" and all(part.isdigit() and int(part) < 256 for part in parts)


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.partition(":")[0]


def _cookie_value(token: str, port: str) -> str:
    return hmac.new(token.encode(), f"tensorboard:{port}".encode(), hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


class Guard:
    """WSGI middleware: the checks of this script's docstring."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        refusal = self.refusal(environ)
        if refusal is not None:
            return _page(start_response, *refusal)
        port = str(environ.get("SERVER_PORT", ""))
        given = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)).get("token")
        if given is not None and environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO") in ("", "/"):
            # Not a redirect: a browser sent here from a terminal keeps that navigation's
            # cross-site-ness through a redirect and withholds the SameSite=Strict cookie.
            cookie = f"{COOKIE_PREFIX}{port}={_cookie_value(self.token, port)}; HttpOnly; Path=/; SameSite=Strict"
            return _page(start_response, "200 OK", "Signed in.", [("Set-Cookie", cookie)],
                         head='<meta http-equiv="refresh" content="0; url=/">')
        return self.app(environ, start_response)

    def refusal(self, environ: dict[str, Any]) -> tuple[str, str] | None:
        host = environ.get("HTTP_HOST", "")
        if not loopback_name(_host_name(host)):
            return "400 Bad Request", (f"Host {host[:100]!r} is not a name of this TensorBoard: use "
                                       "http://127.0.0.1:PORT/ or http://localhost:PORT/.")
        origin = environ.get("HTTP_ORIGIN")
        if origin is not None and origin != f"http://{host}":
            return "403 Forbidden", "Cross-origin requests are refused."
        if not self._authenticated(environ):
            return "401 Unauthorized", ("This TensorBoard asks for the token in the URL `aiptrain jobs "
                                        "tensorboard` printed: open that URL.")
        return None

    def _authenticated(self, environ: dict[str, Any]) -> bool:
        given = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)).get("token")
        if given is not None and _same(given, self.token):
            return True
        if _same(environ.get("HTTP_AUTHORIZATION", ""), f"Bearer {self.token}"):
            return True
        port = str(environ.get("SERVER_PORT", ""))
        expected = _cookie_value(self.token, port)
        return any(_same(value, expected) for value in _cookies(environ.get("HTTP_COOKIE", ""), COOKIE_PREFIX + port))


def _cookies(header: str, name: str) -> list[str]:
    """Every value of `name`: one planted by another port of this host does not hide ours."""
    found = []
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            found.append(value)
    return found


def _page(start_response: Any, status: str, message: str, headers: list[tuple[str, str]] | None = None,
          head: str = "") -> list[bytes]:
    text = message.replace("&", "&amp;").replace("<", "&lt;")
    body = f"<!doctype html>{head}<title>TensorBoard</title><p>{text}</p>".encode()
    start_response(status, [*_HEADERS, *(headers or []), ("Content-Length", str(len(body)))])
    return [body]


def main(argv: list[str]) -> None:
    token = os.environ.pop(TOKEN_VARIABLE, "")
    if not token:
        sys.exit(f"no token in {TOKEN_VARIABLE}: run this through `aiptrain jobs tensorboard`")
    from tensorboard import program  # type: ignore[import-untyped]

    unguarded = program.WerkzeugServer.__init__

    def guarded(self: Any, wsgi_app: Any, flags: Any) -> None:
        unguarded(self, Guard(wsgi_app, token), flags)

    program.WerkzeugServer.__init__ = guarded
    from tensorboard import main as tensorboard_main

    sys.argv = ["tensorboard", *argv]
    tensorboard_main.run_main()


if __name__ == "__main__":
    main(sys.argv[1:])
