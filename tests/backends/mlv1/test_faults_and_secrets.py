"""A flaky service (503, 429 with Retry-After) does not break log streaming; tokens never leak."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.mlv1.backend import MlV1Backend
from aiptrain._backends.mlv1.client import ServiceUnavailable, redact, retry_after_seconds
from aiptrain._backends.polling import AdaptivePoller
from aiptrain._job.logs import LogEntry
from aiptrain._job.spec import JobState, parse_job
from aiptrain._submit.follow import follow_job
from aiptrain.errors import PermissionDenied, TransientError
from tests.fixtures.emulator import Emulator, running_emulator

PROJECT = "fault-project"
PACKAGE = "gs://fault-bucket/trainer.tar.gz"
FAULTS = [
    {"path": "^/v2/entries:list$", "status": 503, "every": 2, "times": 4},
    {"path": "^/v2/entries:list$", "status": 429, "retry_after": 1, "every": 3, "times": 2},
    {"path": "^/v1/projects/[^/]+/jobs/[^/:]+$", "method": "GET", "status": 503, "every": 3, "times": 2},
    {"path": "/jobs/always_down$", "status": 429, "retry_after": 0},
]


@pytest.fixture(scope="module")
def flaky(tmp_path_factory: pytest.TempPathFactory, trainer_sdist: Path) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("flaky-home"), faults=FAULTS) as server:
        server.stage(trainer_sdist, PACKAGE)
        yield server


@pytest.fixture(autouse=True)
def client_home(isolated_environment: Path, flaky: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test is the server's local client: it shares its AIPTRAIN_HOME, so it finds the token."""
    monkeypatch.setenv("AIPTRAIN_HOME", str(flaky.home))


def job(job_id: str, *args: str) -> object:
    return parse_job({"jobId": job_id, "trainingInput": {
        "region": "us-central1", "runtimeVersion": "2.11", "packageUris": [PACKAGE],
        "pythonModule": "trainer.task", "args": list(args)}})


def test_streaming_survives_503_and_429(flaky: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiptrain.rest")
    backend = MlV1Backend(BackendSettings(project=PROJECT, api_endpoint=flaky.url))
    backend.create_job(job("flaky_job", "--lines", "5"))  # type: ignore[arg-type]
    seen: list[LogEntry] = []
    result = follow_job(backend, "flaky_job", on_entry=seen.append, timeout=120,
                        poller=AdaptivePoller(fast=0.2, ceiling=0.5))
    assert result.job.state == JobState.SUCCEEDED
    lines = [e.message for e in seen if e.message.startswith("line ")]
    assert lines == [f"line {i} from chief-0" for i in range(5)]
    assert len({e.cursor for e in seen}) == len(seen)
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert any("UNAVAILABLE" in text for text in retries)
    assert any("RESOURCE_EXHAUSTED" in text and "retrying in 1.0 s" in text for text in retries)


def test_retries_give_up_with_a_transient_error(flaky: Emulator) -> None:
    backend = MlV1Backend(BackendSettings(project=PROJECT, api_endpoint=flaky.url))
    with pytest.raises(ServiceUnavailable) as raised:
        backend.get_job("always_down")
    assert isinstance(raised.value, TransientError)
    assert raised.value.retry_after == 0.0
    assert raised.value.exit_code == 1


def test_unreachable_endpoint_is_a_transient_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = MlV1Backend(BackendSettings(project=PROJECT, api_endpoint=f"http://127.0.0.1:{port}/"))
    with pytest.raises(TransientError, match=r"cannot reach http://127\.0\.0\.1"):
        backend.read_logs("anything")


def test_bearer_token_is_required_and_never_logged(tmp_path: Path, trainer_sdist: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    token = "tok-" + secrets.token_hex(16)
    caplog.set_level(logging.DEBUG)  # every logger, googleapiclient and google.auth included
    with running_emulator(tmp_path / "home", token=token) as server:
        server.stage(trainer_sdist, PACKAGE)
        settings = BackendSettings(project=PROJECT, api_endpoint=server.url)
        with pytest.raises(PermissionDenied) as refused:
            MlV1Backend(settings).get_job("x")
        assert "UNAUTHENTICATED" in refused.value.message

        monkeypatch.setenv("AIPTRAIN_API_TOKEN", token)
        backend = MlV1Backend(settings)
        backend.create_job(job("with_token", "--lines", "1"))  # type: ignore[arg-type]
        result = follow_job(backend, "with_token", on_entry=lambda _: None, timeout=120,
                            poller=AdaptivePoller(fast=0.2, ceiling=0.5))
        assert result.job.state == JobState.SUCCEEDED
        server_log = server.server_log()
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    assert "Authorization" in logged or "authorization" in logged  # requests were logged...
    assert "<redacted>" in logged
    assert token not in logged  # ...without the token
    assert token not in server_log
    assert token not in str(refused.value) and token not in (refused.value.hint or "")


def test_redact() -> None:
    assert redact("Authorization: Bearer ya29.a0AfB_xyz-123") == "Authorization: Bearer <redacted>"
    assert redact("https://h/v1/x?alt=json&access_token=abc.def&key=k1") == (
        "https://h/v1/x?alt=json&access_token=<redacted>&key=<redacted>")


def test_retry_after_forms() -> None:
    now = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds("Tue, 02 Jan 2024 03:04:15 GMT", now=now) == 10.0
    assert retry_after_seconds("Tue, 02 Jan 2024 03:04:00 GMT", now=now) == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
