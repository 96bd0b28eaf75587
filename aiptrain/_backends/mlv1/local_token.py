"""The credential of a client of `aiptrain local serve` on this machine: its token file.

The server writes its bearer token to `paths.serve_token_path(port)` (0600) when it starts, and a
new one each time it restarts. The credential reads the file when built and again whenever the
server answers 401, so a client that outlives a restart (`--stream-logs`, `jobs wait`) carries
on with the new token instead of failing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.auth import credentials, exceptions


def read_token(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


class LocalServeToken(credentials.Credentials):
    def __init__(self, path: Path, token: str) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._path = path
        self.token = token

    def refresh(self, request: Any) -> None:
        token = read_token(self._path)
        if token is None:
            raise exceptions.RefreshError(  # type: ignore[no-untyped-call]
                f"the emulator's token file {self._path} is gone: is it still running?")
        self.token = token
