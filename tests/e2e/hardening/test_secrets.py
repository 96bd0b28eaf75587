"""The emulator's token stays in the emulator: not in argv, not in any trainer's environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._cli.main import root
from aiptrain._packaging import build_package
from tests.fixtures.engine import wait_until

PROJECT = "secret-project"
TOKEN = "serve-token-5e9f1c0b7d"
CLIENT_TOKEN = "client-token-8a2d4e6f"


def _env_dumping_package(root: Path) -> Path:
    package = root / "project" / "trainer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text("import os\nfor key, value in sorted(os.environ.items()):\n"
                                     "    print(f'{key}={value}', flush=True)\n")
    return build_package(package, cache_dir=root / "cache").path


def _call(url: str, method: str = "GET", body: Any = None, token: str | None = TOKEN) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@pytest.mark.parametrize("source", ["token-file", "environment"])
def test_the_server_keeps_its_token_out_of_argv_and_out_of_trainers(tmp_path: Path, source: str) -> None:
    home = tmp_path / "home"
    sdist = _env_dumping_package(tmp_path)
    staged = home / "storage" / "secret-bucket" / "pkg" / sdist.name
    staged.parent.mkdir(parents=True)
    shutil.copy(sdist, staged)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {**os.environ, "AIPTRAIN_HOME": str(home), "AIPTRAIN_API_TOKEN": CLIENT_TOKEN}
    argv = [sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0"]
    if source == "token-file":
        argv += ["--token-file", str(token_file)]
    else:
        env["AIPTRAIN_SERVE_TOKEN"] = TOKEN
    server = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        announced = server.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", announced)
        assert found, announced
        url = found.group(1)
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
        assert TOKEN.encode() not in cmdline
        assert _call(f"{url}v1/projects/{PROJECT}/jobs", token=None)[0] == 401
        status, created = _call(f"{url}v1/projects/{PROJECT}/jobs", "POST", {
            "jobId": "dump_env", "trainingInput": {
                "region": "us-central1", "pythonModule": "trainer.task",
                "packageUris": [f"gs://secret-bucket/pkg/{sdist.name}"]}})
        assert status == 200, created

        def ended() -> Any:
            job = _call(f"{url}v1/projects/{PROJECT}/jobs/dump_env")[1]
            return job if job.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED") else None

        assert wait_until(ended, 120, "the job to end")["state"] == "SUCCEEDED"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    lines = [entry.message for entry in LocalJobEngine(home).logs(PROJECT, "dump_env")]
    assert any(line.startswith("AIPTRAIN_HOME=") for line in lines)  # the trainer did print its env
    assert not any(TOKEN in line or CLIENT_TOKEN in line for line in lines)
    assert not any(line.startswith(("AIPTRAIN_SERVE_TOKEN=", "AIPTRAIN_API_TOKEN=")) for line in lines)


def test_token_on_the_command_line_warns_that_ps_shows_it() -> None:
    result = CliRunner().invoke(root, ["local", "serve", "--host", "192.0.2.1", "--token", "abc"],
                                catch_exceptions=False)
    assert "visible to every user" in result.stderr
    assert "--token-file" in result.stderr
    assert result.exit_code == 2  # refused anyway: no --allow-remote


def test_token_from_the_environment_does_not_warn(monkeypatch: Any) -> None:
    monkeypatch.setenv("AIPTRAIN_SERVE_TOKEN", "abc")
    result = CliRunner().invoke(root, ["local", "serve", "--host", "192.0.2.1"], catch_exceptions=False)
    assert "visible to every user" not in result.stderr
    assert result.exit_code == 2
