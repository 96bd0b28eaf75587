"""A trainer's exact pins date its job: read from the package as the install reads it, dated by a
package index on loopback (PEP 691 JSON with upload times, as PyPI answers), and remembered so a
second job asks the index nothing and an offline one still knows."""

from __future__ import annotations

import datetime
import io
import json
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from aiptrain._environments.release_dates import DatesUnavailable, ReleaseDates
from aiptrain._environments.trainer_pins import Pin, day_with_pins, exact_pins
from aiptrain._job.catalog import load_catalog
from aiptrain._job.era import SERVICE_END, resolve_day
from tests.fixtures.loopback_http import LoopbackServer

# What the index on loopback holds: project -> [(file name, upload time)].
RELEASES = {
    "pandas": [("pandas-0.24.2.tar.gz", "2019-03-14T00:00:00Z"), ("pandas-1.4.1.tar.gz", "2022-02-12T09:00:00Z"),
               ("pandas-1.4.1-cp38-cp38-manylinux_2_17_x86_64.whl", "2022-02-12T11:00:00Z"),
               ("pandas-1.4.1-cp310-cp310-win_amd64.whl", "2022-02-14T10:00:00Z")],
    "tabulate": [("tabulate-0.8.7.tar.gz", "2020-03-17T00:00:00Z"), ("tabulate-0.8.9.tar.gz", "2021-02-22T01:00:00Z")],
    "late": [("late-1.0.0.tar.gz", "2025-06-01T00:00:00Z")],
}


@dataclass
class LocalIndex:
    url: str
    asked: list[str] = field(default_factory=list)
    close: Callable[[], None] = lambda: None


@pytest.fixture
def local_index() -> Iterator[LocalIndex]:
    """A simple index answering PEP 691 JSON project pages (404 for what it does not hold)."""
    index = LocalIndex(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            project = self.path.strip("/").split("/")[-1]
            index.asked.append(project)
            if project not in RELEASES:
                self.send_error(404)
                return
            body = json.dumps({"meta": {"api-version": "1.0"}, "name": project, "files": [
                {"filename": name, "url": f"/files/{name}", "hashes": {}, "upload-time": when}
                for name, when in RELEASES[project]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = LoopbackServer(Handler)
    index.url = f"http://127.0.0.1:{server.port}/simple"
    index.close = server.close
    try:
        yield index
    finally:
        server.close()


def _env(index_url: str) -> dict[str, str]:
    return {"PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": index_url}


def _sdist(tmp_path: Path, files: dict[str, str]) -> Path:
    """An sdist `trainer-0.1.tar.gz` holding `files` under `trainer-0.1/`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "trainer-0.1.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(f"trainer-0.1/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return path


RUNTIME_115 = resolve_day(load_catalog().runtimes["1.15"], None, {})


def test_the_pins_are_what_the_install_reads_on_the_jobs_python(tmp_path: Path) -> None:
    # setuptools' requires.txt: the plain lines, and a marker-only section under its marker; an
    # extra's never installs, and a range is not a pin.
    built = _sdist(tmp_path, {
        "setup.py": "raise SystemExit('never run')\n",
        "trainer.egg-info/requires.txt": "pandas==1.4.1\ntabulate>=0.8\n\n[:python_version < \"3\"]\nfutures==3.3.0\n\n"
                                         "[:python_version >= \"3.7\"]\nsix==1.15.0\n\n[gpu]\ntensorflow-gpu==2.8.0\n",
    })
    assert exact_pins(built, "3.7") == [Pin("pandas", "1.4.1"), Pin("six", "1.15.0")]
    assert exact_pins(built, "2.7") == [Pin("pandas", "1.4.1"), Pin("futures", "3.3.0")]

    # A hand-made sdist without egg-info: setup.py's literal install_requires, or the
    # requirements.txt it reads.
    literal = _sdist(tmp_path / "a", {"setup.py": "REQUIRED = ['tabulate == 0.8.9', 'numpy']\n"
                                                  "setup(name='t', install_requires=REQUIRED)\n"})
    assert exact_pins(literal, "3.7") == [Pin("tabulate", "0.8.9")]
    read = _sdist(tmp_path / "b", {"setup.py": "setup(install_requires=open('requirements.txt').read().split())\n",
                                   "requirements.txt": "# pinned by a bot\n-i https://example.invalid\npandas==1.4.1\n"})
    assert exact_pins(read, "3.7") == [Pin("pandas", "1.4.1")]

    wheel = tmp_path / "trainer-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("trainer-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: trainer\nVersion: 0.1\n"
                                                           "Requires-Dist: tabulate (==0.8.9)\nRequires-Dist: numpy\n")
    assert exact_pins(wheel, "3.7") == [Pin("tabulate", "0.8.9")]


def test_the_newest_pin_moves_the_runtimes_day_and_a_named_day_stays(tmp_path: Path, local_index: LocalIndex) -> None:
    package = _sdist(tmp_path, {"trainer.egg-info/requires.txt": "tabulate==0.8.9\npandas==1.4.1\nsix\n"})
    dates = ReleaseDates(tmp_path / "dates", _env(local_index.url))
    moved = day_with_pins(RUNTIME_115, [package], "3.7", dates)
    # The first upload of pandas 1.4.1 was on 2022-02-12 (its Windows wheel came two days later).
    assert moved.day == datetime.date(2022, 2, 12)
    assert moved.line().startswith(
        "Trainer packages resolve as of 2022-02-12: the trainer pins pandas==1.4.1, published that day, after "
        "runtime 1.15's day (2020-12-19).")
    assert moved.label == "2022-02-12" and moved.exclude_newer == "2022-02-13T00:00:00Z"

    labelled = resolve_day(load_catalog().runtimes["1.15"], {"aiptrain-resolve-as-of": "2021-01-31"}, {})
    assert day_with_pins(labelled, [package], "3.7", dates) == labelled
    setting = resolve_day(load_catalog().runtimes["1.15"], None, {"AIPTRAIN_RESOLVE_AS_OF": "2020-12-19"})
    assert day_with_pins(setting, [package], "3.7", dates) == setting

    # Pins of the runtime's day or before leave it; one after the service stopped moves it to its last day.
    old = _sdist(tmp_path / "old", {"trainer.egg-info/requires.txt": "pandas==0.24.2\n"})
    assert day_with_pins(RUNTIME_115, [old], "3.7", dates) == RUNTIME_115
    late = _sdist(tmp_path / "late", {"trainer.egg-info/requires.txt": "late==1.0\n"})
    capped = day_with_pins(RUNTIME_115, [late], "3.7", dates)
    assert capped.day == SERVICE_END == datetime.date(2025, 1, 31)
    assert "the trainer pins late==1.0, published on 2025-06-01, and the service ran its last jobs on 2025-01-31" \
        in capped.line()


def test_release_dates_are_asked_once_and_known_offline(tmp_path: Path, local_index: LocalIndex) -> None:
    where = tmp_path / "dates"
    first = ReleaseDates(where, _env(local_index.url))
    assert first.published("Tabulate", "0.8.9") == datetime.date(2021, 2, 22)
    assert first.published("tabulate", "0.8.7") == datetime.date(2020, 3, 17)
    assert local_index.asked == ["tabulate"]
    assert json.loads((where / "tabulate.json").read_text())["releases"]["0.8.9"] == "2021-02-22"

    # Another job (another process would read the same file): nothing asked.
    second = ReleaseDates(where, _env(local_index.url))
    assert second.published("tabulate", "0.8.9") == datetime.date(2021, 2, 22)
    assert local_index.asked == ["tabulate"]
    # A release the file does not know asks again; a project the index lacks has no day.
    assert second.published("tabulate", "9.9") is None and local_index.asked == ["tabulate", "tabulate"]
    assert second.published("no-such-project", "1.0") is None

    # Offline (the index gone): what is remembered still answers, the rest says why it cannot.
    local_index.close()
    offline = ReleaseDates(where, _env(local_index.url))
    assert offline.published("tabulate", "0.8.9") == datetime.date(2021, 2, 22)
    with pytest.raises(DatesUnavailable, match=f"{local_index.url} cannot be reached"):
        offline.published("pandas", "1.4.1")
