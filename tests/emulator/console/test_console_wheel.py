"""The wheel carries the console's stylesheet, script and icon, and a server run from it (not from
the checkout) serves them and its pages, which load nothing from anywhere else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx

from aiptrain._emulator.console.responses import CONTENT_SECURITY_POLICY
from tests.fixtures.wheel import REPO, build_wheel

STATIC = REPO / "aiptrain" / "_emulator" / "console" / "static"


def test_a_server_installed_from_the_wheel_serves_the_console_offline(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    installed = tmp_path / "installed"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(installed)
    shipped = sorted(path.name for path in (installed / "aiptrain/_emulator/console/static").iterdir())
    assert shipped == sorted(path.name for path in STATIC.iterdir()) and "console.js" in shipped

    home, token = tmp_path / "home", "wheel-test-token"
    env = {**os.environ, "PYTHONPATH": str(installed), "AIPTRAIN_HOME": str(home), "AIPTRAIN_SERVE_TOKEN": token}
    # Not from the checkout: the interpreter starts elsewhere and imports the extracted wheel first.
    check = subprocess.run([sys.executable, "-c", "import aiptrain; print(aiptrain.__file__)"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, check=True)
    assert check.stdout.strip().startswith(str(installed))
    log = tmp_path / "serve.log"
    with open(log, "wb") as sink:
        server = subprocess.Popen([sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0"], env=env,
                                  cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT)
    try:
        url = _served_url(log, server)
        with httpx.Client(base_url=url, timeout=30) as client:
            signed_in = client.get(f"/?token={token}")
            assert signed_in.status_code == 200, signed_in.text
            page = client.get("/console/projects/local-project/jobs")
            assert page.status_code == 200 and page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            loaded = re.findall(r'(?:src|href)="([^"]+)"', page.text)
            assert loaded and all(link.startswith("/") for link in loaded), loaded
            for name in ("console.css", "console.js", "favicon.svg"):
                answer = client.get(f"/console/static/{name}")
                assert answer.status_code == 200
                assert answer.content == (STATIC / name).read_bytes()
    finally:
        server.terminate()
        server.wait(timeout=30)


def _served_url(log: Path, server: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    while True:
        match = re.search(r"on (http://127\.0\.0\.1:\d+/)", log.read_text(errors="replace"))
        if match:
            return match.group(1)
        assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.1)
