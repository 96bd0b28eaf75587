"""The emulator's bearer token: generated at start unless one is given, kept in a 0600 file.

A server that can start processes must not answer whoever can reach its port (another user of
the machine, a web page through the browser), so `local serve` asks for a token by default, as a
notebook server does. The token lives in `paths.serve_token_path(port)` for as long as the
server runs: aiptrain's own clients of a loopback endpoint and gcloud (`auth/access_token_file`)
read it from there.

Beside it, `local serve` writes a Google credentials file (`write_credentials_file`): an
`authorized_user` file that already carries the token with a far expiry, so google-auth (the Vertex
AI SDK, google-cloud-storage, Airflow's hooks) sends it as it is through
GOOGLE_APPLICATION_CREDENTIALS; a refresh goes to `oauth2.googleapis.com/token`, which the
proxy answers with the same token (`proxied_hosts`).

The console in the browser uses the same token, as a notebook server does: the URL printed at
start carries it once (`?token=`), and the server answers with a session cookie (HttpOnly,
SameSite=Strict, named after the port: cookies are per host, not per port) that stands for it
from then on. The cookie is a random nonce signed with the token, so it never reveals the token
and stops working when the token changes; the console's CSRF token is derived from it the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from aiptrain._paths import serve_token_path
from aiptrain.errors import OperationalError

TOKEN_BYTES = 32
SESSION_COOKIE_PREFIX = "aiptrain-console-"


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def write_token_file(token: str, port: int, home: Path | None) -> Path:
    """Store `token` for the server on `port`; the file is private from its first byte."""
    path = serve_token_path(port, home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # No newline: gcloud sends the file's content as it is.
    write_private_file(path, token, what="the emulator's token file",
                       hint="check that AIPTRAIN_HOME is writable, or pass --no-auth")
    return path


def write_private_file(path: Path, text: str, *, what: str, hint: str) -> None:
    """Write `text` to `path`, readable by this user only from its first byte, whole or not at all."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        # O_EXCL with mode 0600: no moment at which the file exists with wider permissions.
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise OperationalError(f"cannot write {what} {path}: {error.strerror or error}", hint=hint) from None


def credentials_path(port: int, home: Path | None) -> Path:
    """The Google credentials file of the server on `port`, beside its token file."""
    return credentials_beside(serve_token_path(port, home))


def credentials_beside(token_file: Path) -> Path:
    return token_file.with_name(f"{token_file.name}.credentials.json")


# What the credentials file of a server started with --no-auth carries: it asks for no token.
NO_AUTH_TOKEN = "aiptrain-no-auth"  # noqa: S105 - not a secret: such a server takes any token


def credential_token(token: str | None) -> str:
    """The token the credentials file carries and a refresh returns."""
    return token or NO_AUTH_TOKEN


def refresh_token_for(token: str) -> str:
    """The refresh token the credentials file carries: derived from the server's token, so a refresh
    that does not come from that file is refused."""
    return _mac(token, "refresh", "authorized_user")


def write_credentials_file(token: str, port: int, home: Path | None) -> Path:
    """An `authorized_user` credentials file holding `token` until 2099: google-auth sends it without
    a refresh. Private from its first byte, like the token file."""
    import json

    path = credentials_path(port, home)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    content = {"type": "authorized_user", "client_id": "aiptrain-local-serve", "client_secret": "aiptrain-local-serve",
               "refresh_token": refresh_token_for(token), "token": token, "expiry": "2099-01-01T00:00:00Z",
               "token_uri": "https://oauth2.googleapis.com/token"}
    write_private_file(path, json.dumps(content, indent=2) + "\n", what="the emulator's credentials file",
                       hint="check that AIPTRAIN_HOME is writable")
    return path


def remove_token_file(path: Path, token: str) -> None:
    """Remove the file if it still holds our token (another server may have taken the port since),
    and the page `aiptrain local console` wrote beside it, which holds the token too."""
    try:
        if path.read_text(encoding="utf-8") == token:
            path.unlink()
            console_launcher_path(path).unlink(missing_ok=True)
            credentials_beside(path).unlink(missing_ok=True)
    except OSError:
        pass


def console_launcher_path(token_file: Path) -> Path:
    """The page that sends a browser on to the console with the token (`console.launcher`)."""
    return token_file.with_name(f"{token_file.name}.console.html")


def session_cookie_name(port: int) -> str:
    return f"{SESSION_COOKIE_PREFIX}{port}"


def new_session(secret: str) -> str:
    """A session cookie's value: `NONCE.MAC`, the nonce signed with `secret` (the server's token)."""
    nonce = secrets.token_urlsafe(16)
    return f"{nonce}.{_mac(secret, 'session', nonce)}"


def session_is_valid(secret: str, value: str) -> bool:
    nonce, _, mac = value.partition(".")
    return bool(nonce) and hmac.compare_digest(mac.encode(), _mac(secret, "session", nonce).encode())


def csrf_token(secret: str, session: str) -> str:
    """What a state-changing console request must carry in its X-CSRF-Token header, per session."""
    return _mac(secret, "csrf", session)


def _mac(secret: str, purpose: str, text: str) -> str:
    return hmac.new(secret.encode(), f"{purpose}:{text}".encode(), hashlib.sha256).hexdigest()
