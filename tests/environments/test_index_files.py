"""The index of the day keeps its pages and files on disk for Python 2.7 builds (pip 20.3.4 keeps
no HTTP cache behind this machine's proxy): the first request streams a file from the real index,
later ones, with the network gone, are answered from disk."""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from aiptrain._environments.dated_index import DatedIndex
from aiptrain._environments.index_files import IndexFiles

pytestmark = pytest.mark.slow
DAY = "2021-01-01T00:00:00Z"  # python-networkdays: 0.0.1 of 2020-06-14, 1.0.2 of 2020-12-28, 1.1 of 2021-09-13
WHEEL = "python_networkdays-1.0.2-py3-none-any.whl"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return bytes(answer.read())


def test_files_and_pages_of_the_day_are_fetched_once_then_served_from_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = IndexFiles(tmp_path / "python2-index")
    with DatedIndex(DAY, dict(os.environ), kept) as index:
        page = _get(index.url + "python-networkdays/").decode()
        [href] = re.findall(rf'href="([^"]*/{re.escape(WHEEL)}#sha256=[0-9a-f]{{64}})"', page)
        assert href.startswith("/files/") and "1.1" not in page  # pip is linked to the index itself
        body = _get(urllib.parse.urljoin(index.url, href))
    digest = href.rsplit("#sha256=", 1)[1]
    assert hashlib.sha256(body).hexdigest() == digest
    assert (tmp_path / "python2-index" / "files" / digest).read_bytes() == body

    # No network now: nothing answers on the discard port of loopback.
    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with DatedIndex(DAY, dict(os.environ), IndexFiles(tmp_path / "python2-index")) as offline:
        assert _get(urllib.parse.urljoin(offline.url, href)) == body  # asked before its page: from disk
        again = _get(offline.url + "python-networkdays/").decode()
        assert href in again and offline.unfiltered == set()
