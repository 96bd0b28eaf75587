"""`aiptrain local console`: a browser sent to the console of a `local serve` on this machine.

The browser must arrive with the server's token (`?token=`), but a command line is visible to
every user in `ps`, so the browser is never started with the token: it gets the name of a small
page (0600, beside the token file, removed with it) that sends it on to the URL with the token, as
a notebook server opens itself.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiptrain._emulator.console.html import escape
from aiptrain._emulator.serve import base_url, console_url
from aiptrain._emulator.tokens import console_launcher_path, write_private_file
from aiptrain._paths import serve_token_path
from aiptrain.errors import OperationalError

CONNECT_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True)
class ConsoleAddress:
    url: str  # the console, without the token
    with_token: str  # the URL the server prints at start
    launcher: Path | None  # the page that forwards a browser to `with_token` (None: no token to carry)


def console_address(host: str, port: int, home: Path | None) -> ConsoleAddress:
    """Where the server on host:port serves its console; OperationalError when nothing listens there."""
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=CONNECT_TIMEOUT_SECONDS):
            pass
    except OSError as error:
        raise OperationalError(f"nothing answers on {base_url(host, port)}: {error.strerror or error}",
                               hint=f"start the server first: aiptrain local serve --port {port}") from None
    url = base_url(host, port)
    token_file = serve_token_path(port, home)
    try:
        token = token_file.read_text(encoding="utf-8").strip() or None
    except OSError:
        token = None  # a server without a token, or one of another AIPTRAIN_HOME: its login page asks
    if token is None:
        return ConsoleAddress(url, url, None)
    with_token = console_url(url, token)
    return ConsoleAddress(url, with_token, write_launcher(token_file, with_token))


def write_launcher(token_file: Path, target: str) -> Path:
    path = console_launcher_path(token_file)
    page = (f'<!doctype html>\n<meta charset="utf-8">\n<meta http-equiv="refresh" content="0; url={escape(target)}">\n'
            f'<title>aiptrain console</title>\n<p><a href="{escape(target)}">Open the aiptrain console</a></p>\n')
    write_private_file(path, page, what="the console's launcher page",
                       hint="check that AIPTRAIN_HOME is writable, or use --no-browser")
    return path


def open_in_browser(address: ConsoleAddress, opener: Callable[[str], bool]) -> None:
    """Start the browser on the launcher page (or the plain URL); OperationalError if none starts."""
    target = address.launcher.as_uri() if address.launcher is not None else address.url
    if not opener(target):
        raise OperationalError("no web browser could be started here",
                               hint="set BROWSER, or run `aiptrain local console --no-browser` and open the "
                               "address it prints")
