"""A package index of the job's day, for pip: the configured index with every later file left out.

uv takes the day as `--exclude-newer`; the pip of a runtime environment (24.0 on Python 3.7, 21.3
on 3.6) has no such option. So when a package falls back to pip, pip is pointed at this index on
127.0.0.1: a project page (`/simple/<name>/`) is the configured index's page, asked for in its JSON
form (PEP 691, which gives each file's `upload-time`), without the files uploaded after the day,
answered in the HTML form every pip reads (PEP 503: `data-requires-python`, `data-yanked`), with
absolute file URLs and their hashes. pip then downloads the files from where they are.

An index that gives no upload times cannot be filtered: its pages are passed on as they are, and
`unfiltered` names the projects, for the log to say so. With `files` (the Python 2.7 builds'), pages
of the day and the files pip downloads are kept on disk and served from there (`index_files`).
"""

from __future__ import annotations

import hashlib
import html
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiptrain._environments.index_files import IndexFiles, Sink, open_url
from aiptrain._environments.overlay import normalise
from aiptrain._environments.pip_config import pip_settings

PYPI_SIMPLE = "https://pypi.org/simple"
_JSON = "application/vnd.pypi.simple.v1+json"
_TIMEOUT = 60


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str  # absolute, with its #sha256= fragment when the index gives one
    requires_python: str | None
    yanked: str | bool
    uploaded: datetime | None


class ConfiguredIndex:
    """The package index pip is configured with (PyPI by default), asked for project pages."""

    def __init__(self, env: Mapping[str, str]) -> None:
        settings = pip_settings(env)
        self.upstream = settings.values.get("index-url", PYPI_SIMPLE).strip().rstrip("/")
        cert = settings.values.get("cert", "").strip() or None
        self._context = ssl.create_default_context(cafile=cert)

    def page(self, project: str) -> tuple[list[IndexFile] | None, bytes]:
        """A project's files with their upload times, or (None, the page as it came) when the index
        gives none; ([], b"") for a project it does not have. OSError when it cannot be reached
        (urllib.error.URLError is one)."""
        page_url = f"{self.upstream}/{normalise(project)}/"
        request = urllib.request.Request(page_url, headers={"Accept": f"{_JSON}, text/html;q=0.1"})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT, context=self._context) as answer:  # noqa: S310
                body, kind = answer.read(), answer.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            return ([], b"") if error.code == 404 else (None, b"")
        return _parsed(body, kind, page_url)


class DatedIndex:
    """The index of the day `before` (an RFC 3339 instant: files uploaded from then on are left
    out; None keeps every file), served on 127.0.0.1 while open."""

    def __init__(self, before: str | None, env: Mapping[str, str], files: IndexFiles | None = None) -> None:
        self._index = ConfiguredIndex(env)
        self.upstream = self._index.upstream
        self.kept = files
        self.before = datetime.fromisoformat(before.replace("Z", "+00:00")) if before else None
        self.unfiltered: set[str] = set()
        self._pages: dict[str, tuple[list[IndexFile] | None, bytes]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="dated-index", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/simple/"

    def files(self, project: str) -> list[IndexFile] | None:
        """The project's files of the day (None: the index gave no upload times to filter by)."""
        listed, _raw = self._page(normalise(project))
        if listed is None:
            return None
        return [f for f in listed if self.before is None or (f.uploaded is not None and f.uploaded < self.before)]

    def has_version(self, project: str, version: str) -> bool:
        """Whether a file of `project==version` is on the index of the day."""
        files = self.files(project)
        if files is None:
            return True  # cannot tell: let pip look
        return any(name_and_version(f.filename) == (normalise(project), version) for f in files)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> DatedIndex:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the configured index ---------------------------------------------------------------

    def _page(self, project: str) -> tuple[list[IndexFile] | None, bytes]:
        with self._lock:
            found = self._pages.get(project)
        if found is not None:
            return found
        day = f"{self.upstream}|{self.before.isoformat()}" if self.before is not None else ""
        kept = self.kept.page(_safe(day), project) if self.kept is not None and day else None
        if kept is not None:
            found = ([_from_json(raw) for raw in kept], b"")
            with self._lock:
                self._pages[project] = found
            return found
        found = self._index.page(project)
        if found[0] is None:
            self.unfiltered.add(project)
        elif self.kept is not None and self.before is not None:
            before = self.before
            self.kept.keep_page(_safe(day), project, [_to_json(f) for f in found[0]
                                                      if f.uploaded is not None and f.uploaded < before])
        with self._lock:
            self._pages[project] = found
        return found

    def _html(self, project: str) -> bytes | None:
        listed, raw = self._page(project)
        if listed is None:
            return raw or None
        links = []
        for item in self.files(project) or []:
            attributes = ""
            if item.requires_python:
                attributes += f' data-requires-python="{html.escape(item.requires_python)}"'
            if item.yanked:
                reason = item.yanked if isinstance(item.yanked, str) else ""
                attributes += f' data-yanked="{html.escape(reason)}"'
            url = (self.kept.link(item.url, item.filename) if self.kept is not None else None) or item.url
            links.append(f'<a href="{html.escape(url)}"{attributes}>{html.escape(item.filename)}</a><br/>')
        return ("<!DOCTYPE html>\n<html><head><title>Links for " + html.escape(project) + "</title></head><body>\n"
                + "\n".join(links) + "\n</body></html>\n").encode()


def _parsed(body: bytes, kind: str, page_url: str) -> tuple[list[IndexFile] | None, bytes]:
    """A project page's files, when it is JSON with upload times; else (None, the page as it came)."""
    if _JSON not in kind and "json" not in kind:
        return None, body
    try:
        data = json.loads(body)
    except ValueError:
        return None, b""
    files = []
    for raw in data.get("files", []):
        uploaded = _instant(raw.get("upload-time"))
        if uploaded is None:
            return None, b""
        files.append(_file(raw, page_url, uploaded))
    return files, b""


def _file(raw: dict[str, Any], page_url: str, uploaded: datetime) -> IndexFile:
    url = urllib.parse.urljoin(page_url, str(raw["url"]))
    digest = (raw.get("hashes") or {}).get("sha256")
    if digest and "#" not in url:
        url += f"#sha256={digest}"
    return IndexFile(str(raw["filename"]), url, raw.get("requires-python"), raw.get("yanked") or False, uploaded)


def _to_json(item: IndexFile) -> dict[str, Any]:
    return {"filename": item.filename, "url": item.url, "requires_python": item.requires_python,
            "yanked": item.yanked, "uploaded": item.uploaded.isoformat() if item.uploaded else None}


def _from_json(raw: dict[str, Any]) -> IndexFile:
    return IndexFile(str(raw["filename"]), str(raw["url"]), raw.get("requires_python"), raw.get("yanked") or False,
                     _instant(raw.get("uploaded")))


def _safe(text: str) -> str:
    """A directory name for an index and a day."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def name_and_version(filename: str) -> tuple[str, str] | None:
    """(normalised name, version) of a wheel or sdist file name."""
    if filename.endswith(".whl"):
        parts = filename.split("-")
        return (normalise(parts[0]), parts[1]) if len(parts) >= 5 else None
    for suffix in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(suffix):
            name, _, version = filename.removesuffix(suffix).rpartition("-")
            return (normalise(name), version) if name else None
    return None


def _instant(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _handler_for(index: DatedIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            parts = [p for p in urllib.parse.urlsplit(self.path).path.split("/") if p]
            if len(parts) == 3 and parts[0] == "files" and index.kept is not None:
                if index.kept.serve(parts[1], self._start_file, open_url(index._index._context)):
                    return
                parts = []
            page = index._html(normalise(parts[1])) if len(parts) == 2 and parts[0] == "simple" else None
            if page is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def _start_file(self, length: int) -> Sink:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.end_headers()
            return self.wfile

    return Handler
