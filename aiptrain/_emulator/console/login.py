"""The console's login, as a notebook server's: the token once in the URL, then a session cookie.

`aiptrain local serve` prints `http://127.0.0.1:PORT/?token=TOKEN`, and `aiptrain local console`
opens it. The guard (`guard.RequestGuard`) hands this gate every console request that has no
valid session cookie, and every one that brings `?token=`: a right token is exchanged for an
HttpOnly, SameSite=Strict session cookie and the browser is sent on to the same URL without the
token (by a page of this site, not a redirect: see `login`); anything else gets the login page
(401), which asks for the token. The stylesheet is public, so the login page looks like the rest;
nothing else is.

The cookie is signed with the token and a key drawn when this server started, for its port, and
lapses an hour after it was given (`tokens`); the console's answers renew it every few minutes
while a page is open. So a cookie that reaches another service on 127.0.0.1 (browsers send
cookies to every port of a host) is no key to another server, lapses, and dies with a restart of
this one; and since every cookie of the port's name is tried, one planted by another port (a
same-named cookie with a longer path, which the browser sends first) cannot lock the user out.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request

from aiptrain._emulator.console.assets import STATIC_PREFIX, asset_url
from aiptrain._emulator.console.html import Html, join, tag
from aiptrain._emulator.console.responses import html_page
from aiptrain._emulator.guard import Message, Receive, Scope, Send
from aiptrain._emulator.tokens import SESSION_SECONDS, Session, new_session, session_cookie_name, valid_session

CONSOLE_PREFIX = "/console"
SESSION_SCOPE_KEY = "aiptrain.console_session"  # the request's valid Session, for its CSRF token
SESSION_MAX_AGE = SESSION_SECONDS


def is_console_path(path: str) -> bool:
    return path in ("/", CONSOLE_PREFIX) or path.startswith(CONSOLE_PREFIX + "/")


class ConsoleLogin:
    """The `guard.ConsoleGate` of a server whose token is `token` (None: no token, no login)."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        # Signs the sessions with the token: a restart of the server ends every session it gave.
        self.session_secret = f"{token}:{secrets.token_urlsafe(32)}" if token is not None else None

    def covers(self, path: str) -> bool:
        return is_console_path(path) and not self.public(path)

    def public(self, path: str) -> bool:
        return path.startswith(STATIC_PREFIX)

    def signed_in(self, scope: Scope) -> bool:
        """The request carries a valid session cookie of this server and port (kept in the scope)."""
        if self.session_secret is None:
            return False
        port = request_port(scope)
        for value in cookie_values(scope, session_cookie_name(port)):
            session = valid_session(self.session_secret, value, port)
            if session is not None:
                scope[SESSION_SCOPE_KEY] = session
                return True
        return False

    def renewing(self, scope: Scope, send: Send) -> Send:
        """`send`, adding a renewed session cookie to the answer when the request's is getting old."""
        session = scope.get(SESSION_SCOPE_KEY)
        if not isinstance(session, Session) or not session.wants_renewal() or self.session_secret is None:
            return send
        port = request_port(scope)
        cookie = session_cookie(port, new_session(self.session_secret, port, nonce=session.nonce))

        async def send_renewed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        return send_renewed

    async def login(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        given = request.query_params.get("token")
        if given is not None and self.token is not None and request.method == "GET" and hmac.compare_digest(
                given.encode(), self.token.encode()):
            rest = urlencode([(key, value) for key, value in parse_qsl(request.url.query) if key != "token"])
            target = request.url.path + (f"?{rest}" if rest else "")
            # Not a redirect: a browser sent here by another site (a terminal's link, the page
            # `local console` opens) would carry that navigation's cross-site-ness through a 303 and
            # withhold the SameSite=Strict cookie it was just given; a refresh from this page is a
            # navigation of this site.
            port = request_port(scope)
            assert self.session_secret is not None
            cookie = session_cookie(port, new_session(self.session_secret, port))
            await html_page(forward_page(target), headers={"Set-Cookie": cookie})(scope, receive, send)
            return
        await html_page(login_page(wrong=given is not None), status=401,
                        headers={"WWW-Authenticate": 'Bearer realm="aiptrain"'})(scope, receive, send)


def request_port(scope: Scope) -> int:
    """The port the request came in on (the cookie's name and signature carry it)."""
    server = scope.get("server")
    if server and server[1] is not None:
        return int(server[1])
    for name, value in scope.get("headers", []):
        if name.lower() == b"host":
            _host, _, port = value.decode("latin-1").rpartition(":")
            return int(port) if port.isdigit() and len(port) <= 5 else 80
    return 80


def cookie_values(scope: Scope, name: str) -> list[str]:
    """Every value the request's Cookie headers give `name`, in the order sent."""
    found = []
    for header, value in scope.get("headers", []):
        if header.lower() != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            key, _, text = part.strip().partition("=")
            if key == name:
                found.append(text)
    return found


def session_cookie(port: int, value: str) -> str:
    """The Set-Cookie value of a session: HttpOnly, SameSite=Strict, whole site, ending with the session."""
    return f"{session_cookie_name(port)}={value}; HttpOnly; Max-Age={SESSION_MAX_AGE}; Path=/; SameSite=strict"


def forward_page(target: str) -> str:
    head = join([Html('<meta charset="utf-8">'), tag("meta", http_equiv="refresh", content=f"0; url={target}"),
                 tag("title", "Signed in · aiptrain console"),
                 tag("link", rel="stylesheet", href=asset_url("console.css"))])
    body = tag("p", "Signed in: ", tag("a", "on to the console", href=target), class_="narrow")
    return f"<!doctype html>\n{tag('html', tag('head', head), tag('body', body), lang='en')}"


def login_page(*, wrong: bool) -> str:
    problem = tag("p", "That is not this server's token.", class_="error") if wrong else Html("")
    form = tag("form",
               tag("label", "Token ", tag("input", type="password", name="token", autocomplete="off", required=True,
                                          autofocus=True)),
               tag("button", "Open the console"), method="get", class_="login")
    body = join([
        tag("h1", "This aiptrain console asks for its server's token"),
        problem,
        tag("p", "Open the URL with the token that ", tag("code", "aiptrain local serve"),
            " printed when it started, or run ", tag("code", "aiptrain local console --port PORT"),
            " on this machine; or paste the token (the content of the file the server named, under ",
            tag("code", "$AIPTRAIN_HOME/emulator/tokens/"), "):"),
        form,
    ])
    head = join([Html('<meta charset="utf-8">'), tag("title", "Token needed · aiptrain console"),
                 tag("link", rel="stylesheet", href=asset_url("console.css"))])
    document = tag("html", tag("head", head), tag("body", tag("main", body, class_="narrow")), lang="en")
    return f"<!doctype html>\n{document}"
