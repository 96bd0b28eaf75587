"""Where aiptrain keeps its state on this machine."""

from __future__ import annotations

import os
from pathlib import Path

# The installed aiptrain package (what a supervisor or a Ray node puts on its import path).
PACKAGE_DIR = Path(__file__).resolve().parent


def aiptrain_home() -> Path:
    """$AIPTRAIN_HOME, default ~/.aiptrain; created private (0700) on first use."""
    home = Path(os.environ.get("AIPTRAIN_HOME") or Path.home() / ".aiptrain").expanduser()
    if not home.exists():
        home.mkdir(parents=True, exist_ok=True)
        home.chmod(0o700)
    return home


def serve_token_path(port: int, home: Path | None = None) -> Path:
    """The file holding the bearer token of the `aiptrain local serve` on loopback port `port`.

    The server writes it (0600) when it starts and removes it when it stops; aiptrain's REST
    clients of a loopback endpoint and the gcloud configuration it writes read it from here, so
    nobody copies the token by hand. Another user cannot read it (the home is 0700).
    """
    return (home or aiptrain_home()) / "emulator" / "tokens" / str(port)
