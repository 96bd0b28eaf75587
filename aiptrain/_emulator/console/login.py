"""The console's login, as a notebook server's: the token once in the URL, then a session cookie.

`aiptrain local serve` prints `http://127.0.0.1:PORT/?token=TOKEN`, and `aiptrain local console`
opens it. The guard (`guard.RequestGuard`) hands this gate every console request that has no
valid session cookie, and every one that brings `?token=`: a right token is exchanged for an
HttpOnly, SameSite=Strict session cookie and the browser is sent on to the same URL without the
token (by a page of this site, not a redirect: see `login`); anything else gets the login page
(401), which asks for the token. The stylesheet is public, so the login page looks like the rest;
nothing else is.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request

from aiptrain._emulator.console.assets import STATIC_PREFIX, asset_url
from aiptrain._emulator.console.html import Html, join, tag
from aiptrain._emulator.console.responses import html_page
from aiptrain._emulator.guard import Receive, Scope, Send
from aiptrain._emulator.tokens import new_session, session_cookie_name

CONSOLE_PREFIX = "/console"


def is_console_path(path: str) -> bool:
    return path in ("/", CONSOLE_PREFIX) or path.startswith(CONSOLE_PREFIX + "/")


class ConsoleLogin:
    """The `guard.ConsoleGate` of a server whose token is `token` (None: no token, no login)."""

    def __init__(self, token: str | None) -> None:
        self.token = token

    def covers(self, path: str) -> bool:
        return is_console_path(path) and not self.public(path)

    def public(self, path: str) -> bool:
        return path.startswith(STATIC_PREFIX)

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
            response = html_page(forward_page(target))
            port = scope["server"][1] if scope.get("server") else request.url.port or 80
            response.set_cookie(session_cookie_name(int(port)), new_session(self.token), httponly=True,
                                samesite="strict", path="/")
            await response(scope, receive, send)
            return
        await html_page(login_page(wrong=given is not None), status=401,
                        headers={"WWW-Authenticate": 'Bearer realm="aiptrain"'})(scope, receive, send)


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
