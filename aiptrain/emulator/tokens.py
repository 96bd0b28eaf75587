"""The emulator's bearer token: generated at start unless one is given, kept in a 0600 file.

A server that can start processes must not answer whoever can reach its port (another user of
the machine, a web page through the browser), so `local serve` asks for a token by default, as a
notebook server does. The token lives in `paths.serve_token_path(port)` for as long as the
server runs: aiptrain's own clients of a loopback endpoint and gcloud (`auth/access_token_file`)
read it from there.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from aiptrain.errors import OperationalError
from aiptrain.paths import serve_token_path

TOKEN_BYTES = 32


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def write_token_file(token: str, port: int, home: Path | None) -> Path:
    """Store `token` for the server on `port`; the file is private from its first byte."""
    path = serve_token_path(port, home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        # O_EXCL with mode 0600: no moment at which the file exists with wider permissions.
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(token)  # no newline: gcloud sends the file's content as it is
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise OperationalError(f"cannot write the emulator's token file {path}: {error.strerror or error}",
                               hint="check that AIPTRAIN_HOME is writable, or pass --no-auth") from None
    return path


def remove_token_file(path: Path, token: str) -> None:
    """Remove the file if it still holds our token (another server may have taken the port since)."""
    try:
        if path.read_text(encoding="utf-8") == token:
            path.unlink()
    except OSError:
        pass
