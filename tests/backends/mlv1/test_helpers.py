"""Pure helpers of the REST backends: endpoints, loopback rules, log entries, error translation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import httplib2
import pytest
from googleapiclient.errors import HttpError

from aiptrain._backends.base import BackendSettings
from aiptrain._backends.mlv1 import logs as _logs
from aiptrain._backends.mlv1.backend import MlV1Backend
from aiptrain._backends.mlv1.client import (
    ServiceUnavailable,
    resolve_endpoint,
    translate_http_error,
)
from aiptrain._backends.vertex.backend import VertexBackend
from aiptrain._job.logs import LogCursor
from aiptrain.errors import (
    AlreadyExists,
    NotFound,
    OperationalError,
    PermissionDenied,
    UsageError,
    ValidationFailed,
)


def test_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_endpoint(None, "https://ml.googleapis.com/") == "https://ml.googleapis.com/"
    assert resolve_endpoint("http://127.0.0.1:9", "x") == "http://127.0.0.1:9/"
    monkeypatch.setenv("AIPTRAIN_API_ENDPOINT", "http://localhost:7/")
    assert resolve_endpoint(None, "https://ml.googleapis.com/") == "http://localhost:7/"
    with pytest.raises(UsageError):
        resolve_endpoint("ftp://x", "y")
    monkeypatch.delenv("AIPTRAIN_API_ENDPOINT")
    mlv1 = MlV1Backend(BackendSettings(project="p"))
    assert (mlv1.endpoint, mlv1.logging_endpoint) == ("https://ml.googleapis.com/", "https://logging.googleapis.com/")
    emulated = MlV1Backend(BackendSettings(project="p", api_endpoint="http://127.0.0.1:5/"))
    assert emulated.logging_endpoint == "http://127.0.0.1:5/"  # the emulator serves logging too
    assert VertexBackend(BackendSettings(project="p", region="europe-west4")).endpoint == (
        "https://europe-west4-aiplatform.googleapis.com/")


def test_timestamps() -> None:
    assert _logs.parse_timestamp("2024-01-02T03:04:05.123456789Z") == datetime(2024, 1, 2, 3, 4, 5, 123456, UTC)
    assert _logs.parse_timestamp("2024-01-02T04:04:05+01:00") == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert _logs.format_timestamp(datetime(2024, 1, 2, 3, 4, 5, 7, UTC)) == "2024-01-02T03:04:05.000007Z"
    with pytest.raises(ValueError):
        _logs.parse_timestamp("yesterday")


def test_filter_text_matches_what_gcloud_sends_without_the_lag_bound() -> None:
    cursor = LogCursor(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "0042")
    text = _logs.job_filter('(resource.type="ml_job" OR resource.type="cloudml_job")', "j1", after=cursor,
                            task_name="ps-replica-0")
    assert text == (
        '(resource.type="ml_job" OR resource.type="cloudml_job") AND resource.labels.job_id="j1" AND '
        '((timestamp="2024-01-02T03:04:05.000000Z" AND insertId>"0042") OR timestamp>"2024-01-02T03:04:05.000000Z")'
        ' AND (resource.labels.task_name="ps-replica-0" OR labels.task_name="ps-replica-0")')
    assert _logs.quote('a"b\\') == '"a\\"b\\\\"'


def test_log_entry_shapes() -> None:
    json_entry = _logs.to_log_entry({
        "timestamp": "2024-01-02T03:04:05Z", "insertId": "x", "jsonPayload": {"message": "hi", "levelname": "INFO"},
        "labels": {"ml.googleapis.com/task_name": "worker-replica-1", "ml.googleapis.com/trial_id": "3"}})
    assert (json_entry.message, json_entry.task_name, json_entry.trial_id, json_entry.severity) == (
        "hi", "worker-replica-1", "3", "DEFAULT")
    proto = _logs.to_log_entry({"timestamp": "2024-01-02T03:04:05Z", "insertId": "y", "protoPayload": {},
                                "severity": "ERROR"})
    assert (proto.message, proto.task_name, proto.severity) == ("", "unknown_task", "ERROR")
    renamed = _logs.to_log_entry({"timestamp": "2024-01-02T03:04:05Z", "insertId": "z", "textPayload": "t",
                                  "resource": {"labels": {"task_name": "workerpool0-0"}}},
                                 rename_task=lambda name: name.upper())
    assert renamed.task_name == "WORKERPOOL0-0"


def http_error(status: int, payload: object, headers: dict[str, str] | None = None) -> HttpError:
    response = httplib2.Response({"status": str(status), **(headers or {})})
    response.reason = "Reason"
    return HttpError(response, json.dumps(payload).encode(), uri="http://h/v1/x")


def google_error(status: int, name: str, message: str, details: Sequence[object] | None = None) -> dict[str, object]:
    return {"error": {"code": status, "status": name, "message": message, "details": details or []}}


def test_http_errors_become_aiptrain_errors() -> None:
    assert isinstance(translate_http_error(http_error(404, google_error(404, "NOT_FOUND", "gone")), what="get"),
                      NotFound)
    assert isinstance(translate_http_error(http_error(409, google_error(409, "ALREADY_EXISTS", "x")), what="c"),
                      AlreadyExists)
    assert isinstance(translate_http_error(http_error(403, google_error(403, "PERMISSION_DENIED", "no")), what="c"),
                      PermissionDenied)
    assert isinstance(translate_http_error(http_error(401, google_error(401, "UNAUTHENTICATED", "who")), what="c"),
                      PermissionDenied)
    wrong_state = translate_http_error(http_error(400, google_error(400, "FAILED_PRECONDITION", "nope")), what="c")
    assert type(wrong_state) is OperationalError and wrong_state.message == "c: FAILED_PRECONDITION: nope"
    assert wrong_state.exit_code == 1  # the same as cancelling an ended job on the local backend
    plain = translate_http_error(http_error(400, google_error(400, "INVALID_ARGUMENT", "nope")), what="c")
    assert type(plain) is UsageError and plain.exit_code == 2
    violations = [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                   "fieldViolations": [{"field": "job_id", "description": "bad id"}]}]
    failed = translate_http_error(http_error(400, google_error(400, "INVALID_ARGUMENT", "bad", violations)), what="c")
    assert isinstance(failed, ValidationFailed)
    assert [(p.path, p.message) for p in failed.problems] == [("job_id", "bad id")]
    busy = translate_http_error(http_error(429, google_error(429, "RESOURCE_EXHAUSTED", "slow down"),
                                           {"retry-after": "12"}), what="list")
    assert isinstance(busy, ServiceUnavailable) and busy.retry_after == 12.0
    down = translate_http_error(http_error(502, "<html>bad gateway</html>"), what="list")
    assert isinstance(down, ServiceUnavailable) and down.retry_after is None
    other = translate_http_error(http_error(418, {}), what="x")
    assert type(other) is OperationalError
    secret = translate_http_error(http_error(400, google_error(400, "INVALID_ARGUMENT", "Bearer abc.def leaked")),
                                  what="x")
    assert "abc.def" not in secret.message
