"""Where aiptrain keeps its state on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def aiptrain_home() -> Path:
    """$AIPTRAIN_HOME, default ~/.aiptrain; created private (0700) on first use."""
    home = Path(os.environ.get("AIPTRAIN_HOME") or Path.home() / ".aiptrain").expanduser()
    if not home.exists():
        home.mkdir(parents=True, exist_ok=True)
        home.chmod(0o700)
    return home
