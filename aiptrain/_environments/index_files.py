"""The index of the day's pages and files kept on disk, so that a Python 2.7 build needs the network once.

pip 20.3.4 keeps no HTTP cache behind this machine's proxy (its writes fail silently), so without
this every build of a Python 2.7 environment would download its gigabyte again. Where the index
gives each file's sha256, the dated index (`dated_index`) links pip to itself for the file
(`/files/<sha256>/<name>`): the first request streams it from the index to pip and into
`<root>/files/<sha256>` (kept only when the digest matches), later ones are served from there. A
project's page of a day is kept too (`<root>/pages/<day>/<project>.json`): the files uploaded before a
past day do not change. Entries unused for AIPTRAIN_CACHE_MAX_AGE_DAYS are removed as new ones come.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from aiptrain._cache_eviction import mark_used, remove_unused

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_BLOCK = 1024 * 1024
_TIMEOUT = 60


class Sink(Protocol):
    """Where a file's bytes go: the answer to pip."""

    def write(self, data: bytes, /) -> object: ...


class IndexFiles:
    """The cache under `root` (the Python 2.7 builder's, beside its virtualenv)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._upstream: dict[str, str] = {}  # sha256 -> the file's URL on the index

    def link(self, url: str, filename: str) -> str | None:
        """The local path pip is given for a file of the index (None: it has no sha256 to check)."""
        address, _, fragment = url.partition("#sha256=")
        if not _SHA256.match(fragment):
            return None
        self._upstream[fragment] = address
        return f"/files/{fragment}/{filename}#sha256={fragment}"

    def page(self, day: str, project: str) -> list[dict[str, Any]] | None:
        """A project's files of a past day, as kept (None: not kept yet)."""
        path = self.root / "pages" / day / f"{project}.json"
        try:
            kept = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        mark_used(path.parent)
        return kept if isinstance(kept, list) else None

    def keep_page(self, day: str, project: str, files: list[dict[str, Any]]) -> None:
        directory = self.root / "pages" / day
        with contextlib.suppress(OSError):
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=directory, prefix=".tmp-", delete=False) as out:
                json.dump(files, out)
            os.replace(out.name, directory / f"{project}.json")

    def serve(self, digest: str, send: Callable[[int], Sink], opener: Callable[[str], Any]) -> bool:
        """Write the file `digest` to the client: `send(length)` starts the answer and gives its body's
        stream; `opener(url)` opens the index's file. False when the file is unknown."""
        kept = self.root / "files" / digest
        if kept.is_file():
            mark_used(kept)
            with kept.open("rb") as source:
                shutil_copy(source, send(kept.stat().st_size))
            return True
        address = self._upstream.get(digest)
        if address is None or not _SHA256.match(digest):
            return False
        kept.parent.mkdir(parents=True, exist_ok=True)
        with opener(address) as answer, tempfile.NamedTemporaryFile(dir=kept.parent, prefix=".tmp-",
                                                                    delete=False) as partial:
            length = answer.headers.get("Content-Length")
            body = send(int(length)) if length else None  # streamed on as it comes, else sent once whole
            checksum = hashlib.sha256()
            while block := answer.read(_BLOCK):
                checksum.update(block)
                partial.write(block)
                if body is not None:
                    body.write(block)
        if checksum.hexdigest() != digest:
            os.unlink(partial.name)  # pip checks the digest too, and refuses the file
            return body is not None
        os.replace(partial.name, kept)
        remove_unused(kept.parent, keep=kept)
        if body is None:
            with kept.open("rb") as source:
                shutil_copy(source, send(kept.stat().st_size))
        return True


def shutil_copy(source: BinaryIO, target: Sink) -> None:
    while block := source.read(_BLOCK):
        target.write(block)


def open_url(context: Any) -> Callable[[str], Any]:
    """An opener of the index's files with the index's TLS settings."""
    return lambda url: urllib.request.urlopen(url, timeout=_TIMEOUT, context=context)  # noqa: S310
