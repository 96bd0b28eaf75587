"""The REST backends under HTTPS_PROXY/HTTP_PROXY: loopback and NO_PROXY hosts are reached
directly, any other host through the proxy (httplib2 needs PySocks for that)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain._backends.mlv1.client import _proxy_for
from tests.fixtures.emulator import Emulator
from tests.fixtures.proxy import RecordingProxy

REPO = Path(__file__).resolve().parents[3]
PROJECT = "proxy-project"
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    server = RecordingProxy()
    yield server
    server.shutdown()
    server.server_close()


def aiptrain(*argv: str, proxy: RecordingProxy, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items()
           if key not in PROXY_VARIABLES and not key.startswith("AIPTRAIN_API")}
    env.update({"HTTPS_PROXY": proxy.url, "HTTP_PROXY": proxy.url, "NO_COLOR": "1", **extra})
    return subprocess.run([sys.executable, "-m", "aiptrain", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_an_emulator_on_loopback_is_reached_directly_whatever_the_proxy_variables_say(
    emulator: Emulator, proxy: RecordingProxy
) -> None:
    listed = aiptrain("jobs", "list", "--backend", "mlv1", "--api-endpoint", emulator.url, "--project", PROJECT,
                      "--format", "json", proxy=proxy, extra={"AIPTRAIN_HOME": str(emulator.home)})
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "[]"
    assert proxy.attempts == []


def test_a_remote_endpoint_is_reached_through_the_proxy(proxy: RecordingProxy) -> None:
    described = aiptrain("jobs", "describe", "some_job", "--backend", "mlv1", "--api-endpoint",
                         "https://ml.example.test/", "--project", PROJECT, proxy=proxy,
                         extra={"AIPTRAIN_API_TOKEN": "static-token"})
    assert described.returncode != 0
    assert len(proxy.attempts) >= 1 and all(
        attempt.startswith("CONNECT ml.example.test:443 ") for attempt in proxy.attempts), proxy.attempts
    assert "ml.example.test" in described.stderr
    assert "Proxy support missing" not in described.stderr


@pytest.mark.parametrize(
    ("endpoint", "environment", "proxied"),
    [
        ("http://127.0.0.1:8080/", {"HTTP_PROXY": "http://proxy.corp:3128"}, None),
        ("http://localhost:8080/", {"http_proxy": "http://proxy.corp:3128"}, None),
        ("https://ml.example.test/", {"HTTPS_PROXY": "http://proxy.corp:3128"}, "proxy.corp"),
        ("https://ml.example.test/", {"HTTPS_PROXY": "http://proxy.corp:3128", "NO_PROXY": ".example.test"}, None),
        ("https://ml.example.test/", {"HTTPS_PROXY": "http://proxy.corp:3128", "no_proxy": "ml.example.test"}, None),
        ("https://ml.example.test/", {"HTTP_PROXY": "http://proxy.corp:3128"}, None),  # only for http://
        ("https://ml.example.test/", {}, None),
    ],
)
def test_which_endpoints_get_a_proxy(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, environment: dict[str, str], proxied: str | None
) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    info = _proxy_for(endpoint)
    assert (info.proxy_host if info is not None else None) == proxied
