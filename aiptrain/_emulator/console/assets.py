"""The console's stylesheet, script and icon: package data under `static/`, served from memory.

Everything a page loads comes from here (no CDN, nothing fetched: the console works offline).
Only the files shipped in the package can be asked for, by name; a URL carries the file's content
hash (`?v=`), so a browser may keep an asset as long as it likes and still sees a new version.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources

STATIC_PREFIX = "/console/static/"
_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    name: str
    body: bytes
    media_type: str

    @property
    def version(self) -> str:
        return hashlib.sha256(self.body).hexdigest()[:12]


@functools.cache
def assets() -> dict[str, Asset]:
    """Every file of `static/` whose kind the console serves, by name."""
    folder = resources.files("aiptrain._emulator.console") / "static"
    found: dict[str, Asset] = {}
    for entry in folder.iterdir():
        suffix = entry.name[entry.name.rfind("."):]
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = Asset(entry.name, entry.read_bytes(), _TYPES[suffix])
    return found


def asset(name: str) -> Asset | None:
    return assets().get(name)


def asset_url(name: str) -> str:
    found = assets()[name]
    return f"{STATIC_PREFIX}{name}?v={found.version}"
