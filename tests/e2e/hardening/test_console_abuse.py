"""The console of a real `local serve` under abuse: cookies another service on 127.0.0.1 plants or
replays, log cursors no page of it wrote, and summaries a diverged or huge training writes.

Browsers send a host's cookies to every port of it, so a service on another port of 127.0.0.1
sees the console's session cookie and can set one of the same name. What such a service can do
with them is tried here with raw headers (httpx, no cookie jar), as it would send them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aiptrain._emulator.console.responses import CONTENT_SECURITY_POLICY
from aiptrain._emulator.tokens import session_cookie_name
from tests.fixtures.console_jobs import PROJECT, ConsoleServer, build_console_trainer, console_server

JOB = "abused"
DIVERGED = "diverged"


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    trainer = build_console_trainer(tmp_path_factory.mktemp("console-trainer"))
    with console_server(tmp_path_factory.mktemp("console-home"), trainer) as server:
        server.create(JOB, "--ticks", "1")
        server.create(DIVERGED, "--ticks", "1", jobDir=f"gs://console-bucket/jobs/{DIVERGED}")
        yield server


def _signed_in(console: ConsoleServer) -> str:
    """The session cookie's value the console gives for its token, as a browser gets it."""
    answer = httpx.get(console.page_url(f"/?token={console.token}"))
    assert answer.status_code == 200, answer.text
    value = answer.cookies.get(session_cookie_name(console.emulator.port))
    assert value, answer.headers
    return value


def _get(console: ConsoleServer, path: str, cookie: str, **headers: str) -> httpx.Response:
    return httpx.get(console.page_url(path), headers={"Cookie": cookie, **headers}, timeout=30)


def test_a_cookie_planted_by_another_port_does_not_lock_the_user_out(console: ConsoleServer) -> None:
    name = session_cookie_name(console.emulator.port)
    mine = _signed_in(console)
    page = f"/console/projects/{PROJECT}/jobs/{JOB}"
    # A planted cookie with the job page's path: the browser sends it before the user's own.
    for planted in ("garbage", mine.replace(".", "x", 1), ""):
        answer = _get(console, page, f"{name}={planted}; {name}={mine}")
        assert answer.status_code == 200, answer.text[:300]
        assert JOB in answer.text


def test_a_cookie_with_a_moved_expiry_or_lapsed_is_refused(console: ConsoleServer) -> None:
    name = session_cookie_name(console.emulator.port)
    nonce, expiry, mac = _signed_in(console).split(".")
    page = f"/console/projects/{PROJECT}/jobs/{JOB}"
    for forged in (f"{nonce}.{int(expiry) + 86400}.{mac}", f"{nonce}.{expiry}", f"{nonce}.0.{mac}"):
        answer = _get(console, page, f"{name}={forged}")
        assert answer.status_code == 401 and "Token needed" in answer.text


def test_the_session_cookie_says_when_it_lapses(console: ConsoleServer) -> None:
    answer = httpx.get(console.page_url(f"/?token={console.token}"))
    cookie = answer.headers["set-cookie"].lower()
    assert "max-age=3600" in cookie and "httponly" in cookie and "samesite=strict" in cookie


@pytest.mark.parametrize("cursor", ["2026-01-01T00:00:00.000000Z~" + "9" * 40,
                                    "2026-01-01T00:00:00.000000Z~18446744073709551616",
                                    "0001-01-01T00:00:00.000000Z~1", "x" * 5000])
@pytest.mark.parametrize("where", ["stream-after", "stream-header", "page-before"])
def test_a_log_cursor_no_page_wrote_is_a_clean_400(console: ConsoleServer, cursor: str, where: str) -> None:
    cookie = f"{session_cookie_name(console.emulator.port)}={_signed_in(console)}"
    base = f"/console/projects/{PROJECT}/jobs/{JOB}/logs"
    if where == "stream-after":
        answer = _get(console, f"{base}/stream?after={cursor}", cookie)
    elif where == "stream-header":
        answer = _get(console, f"{base}/stream", cookie, **{"Last-Event-ID": cursor})
    else:
        answer = _get(console, f"{base}?before={cursor}", cookie)
    assert answer.status_code == 400, answer.text[:300]
    assert "log position" in answer.json()["error"]
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "OverflowError" not in console.emulator.server_log()


def _record(step: int, value: float) -> bytes:
    """A TFRecord of an Event holding the TF 1 scalar `loss` (the console does not check CRCs)."""
    tag_value = b"\x0a\x04loss" + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(tag_value)]) + tag_value
    event = b"\x09" + struct.pack("<d", 1.0) + b"\x10" + bytes([step]) + b"\x2a" + bytes([len(summary)]) + summary
    return struct.pack("<Q", len(event)) + bytes(4) + event + bytes(4)


def _write_events(console: ConsoleServer, values: list[float]) -> Path:
    run = console.emulator.storage / "console-bucket" / "jobs" / DIVERGED / "logs" / "train"
    run.mkdir(parents=True, exist_ok=True)
    path = run / "events.out.tfevents.1.host"
    path.write_bytes(b"".join(_record(step, value) for step, value in enumerate(values)))
    return path


def test_a_diverged_or_huge_loss_never_takes_the_job_page_down(console: ConsoleServer) -> None:
    # float32 is what simple_value holds: its largest finite value, then the float32 overflow to inf.
    _write_events(console, [3.0e38, -3.0e38, 1.0, math.nan, 0.5, math.inf, 0.25, -math.inf])
    cookie = f"{session_cookie_name(console.emulator.port)}={_signed_in(console)}"
    page = f"/console/projects/{PROJECT}/jobs/{DIVERGED}"
    answer = _get(console, page, cookie)
    assert answer.status_code == 200, answer.text[:500]
    assert 'data-tag="loss"' in answer.text and answer.text.count("non-finite") == 3
    panels = _get(console, f"{page}?part=panels", cookie)
    assert panels.status_code == 200 and "non-finite" in panels.json()["panels"]["curves"]


@pytest.mark.parametrize("path", ["/console/nope", f"/console/projects/{PROJECT}/jobs/{JOB}/nope",
                                  f"/console/projects/{PROJECT}/jobs/no-such-job"])
def test_an_error_page_carries_the_policy(console: ConsoleServer, path: str) -> None:
    cookie = f"{session_cookie_name(console.emulator.port)}={_signed_in(console)}"
    answer = _get(console, path, cookie)
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
