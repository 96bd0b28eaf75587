"""Table of hostile HTTP exchanges with `aiptrain local serve` (the real app on real uvicorn, with
the server's own protocol guard and limits, its client timeouts shortened to keep the test fast).

Every case gets a 4xx answer with Google's error shape `{"error": {"code", "message", "status"}}`
(or, for what never becomes an HTTP request, a 400 or a closed connection from uvicorn), and after
the whole table every project still lists fine: no request costs the server or a project.
Counting the figures: one case of `EXCHANGES` is one tried request; a passing case is handled.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._emulator import limits
from aiptrain._emulator.app import create_app
from aiptrain._emulator.serve import bind_socket

PROJECT = "hostile-project"
JOBS = f"/v1/projects/{PROJECT}/jobs"
CUSTOM = f"/v1/projects/{PROJECT}/locations/us-central1/customJobs"
TUNING = f"/v1/projects/{PROJECT}/locations/us-central1/hyperparameterTuningJobs"
SHORT_TIMEOUT = 2.0


@dataclass
class Server:
    port: int

    def exchange(self, raw: bytes, *, timeout: float = 30.0) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as connection:
            connection.sendall(raw)
            return _read_response(connection)


def _read_response(connection: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            chunk = connection.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), None)
        if length is not None and len(rest) >= length:
            break
    return data


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits, "BODY_TIMEOUT_SECONDS", SHORT_TIMEOUT)
        patch.setattr(limits, "HEAD_TIMEOUT_SECONDS", SHORT_TIMEOUT)
        home = tmp_path_factory.mktemp("hostile-home")
        app = create_app(LocalJobEngine(home))
        sock = bind_socket("127.0.0.1", 0)
        config = uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off",
                                http=limits.GuardedH11Protocol, **{**limits.UVICORN_LIMITS, "limit_concurrency": 8})
        runner = uvicorn.Server(config)
        thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not runner.started and time.monotonic() < deadline:
            time.sleep(0.02)
        yield Server(sock.getsockname()[1])
        runner.should_exit = True
        thread.join(timeout=30)
        sock.close()


def request(method: str, path: str, body: bytes | str | Any = b"", *, headers: dict[str, str] | None = None,
            length: int | None = None) -> bytes:
    if not isinstance(body, bytes | str):
        body = json.dumps(body)
    payload = body.encode() if isinstance(body, str) else body
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             f"Content-Length: {len(payload) if length is None else length}",
             "Content-Type: application/json", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def tuning_job(**param: Any) -> dict[str, Any]:
    return {"jobId": "tune_nan", "trainingInput": {
        "region": "us-central1", "pythonModule": "trainer.task", "packageUris": ["gs://my-bucket/t-1.0.tar.gz"],
        "hyperparameters": {"goal": "MAXIMIZE", "maxTrials": 2, "params": [
            {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.1, "maxValue": 1.0, **param}]}}}


def vertex_tuning_job(**spec: Any) -> dict[str, Any]:
    return {"displayName": "tune", "maxTrialCount": 2, "parallelTrialCount": 1, "studySpec": {
        "metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1.0, **spec}}]},
        "trialJobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                                              "pythonPackageSpec": {
                                                  "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/"
                                                                      "tf-cpu.2-11.py310:latest",
                                                  "packageUris": ["gs://my-bucket/t-1.0.tar.gz"],
                                                  "pythonModule": "trainer.task"}}]}}


def token(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def deep(levels: int) -> str:
    return '{"jobId": "deep", "labels": ' + '{"a": ' * levels + "1" + "}" * levels + "}"


# (case id, raw request bytes or a function of the server doing something slower, expected HTTP status,
#  expected google.rpc status or None for an answer that comes from uvicorn before the app)
Exchange = bytes | Callable[[Server], bytes]
EXCHANGES: list[tuple[str, Exchange, int, str | None]] = [
    ("body-2-mib", request("POST", JOBS, b"{" + b" " * (2 << 20) + b"}"), 400, "INVALID_ARGUMENT"),
    ("body-declared-200-mb", request("POST", JOBS, b"", length=200_000_000), 400, "INVALID_ARGUMENT"),
    ("body-chunked-2-mib", ("POST " + JOBS + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
     + b"".join(b"%x\r\n%s\r\n" % (65536, b" " * 65536) for _ in range(32)) + b"0\r\n\r\n", 400, "INVALID_ARGUMENT"),
    ("json-array-nested-100000", request("POST", JOBS, "[" * 100_000 + "]" * 100_000), 400, "INVALID_ARGUMENT"),
    ("json-object-nested-150", request("POST", JOBS, deep(150)), 400, "INVALID_ARGUMENT"),
    ("json-object-nested-900", request("POST", JOBS, deep(900)), 400, "INVALID_ARGUMENT"),
    ("json-nan-literal", request("POST", JOBS, json.dumps(tuning_job(minValue=float("nan")))), 400,
     "INVALID_ARGUMENT"),
    ("json-infinity-literal", request("POST", JOBS, json.dumps(tuning_job(maxValue=float("inf")))), 400,
     "INVALID_ARGUMENT"),
    ("json-minus-infinity-literal", request("POST", JOBS, json.dumps(tuning_job(minValue=float("-inf")))), 400,
     "INVALID_ARGUMENT"),
    ("json-overflowing-number", request("POST", JOBS, json.dumps(tuning_job()).replace("0.1", "1e999")), 400,
     "INVALID_ARGUMENT"),
    ("nan-as-string", request("POST", JOBS, tuning_job(minValue="NaN")), 400, "INVALID_ARGUMENT"),
    ("infinity-as-string", request("POST", JOBS, tuning_job(maxValue="Infinity")), 400, "INVALID_ARGUMENT"),
    ("discrete-nan-as-string", request("POST", JOBS, tuning_job(type="DISCRETE", discreteValues=[1, "NaN"])), 400,
     "INVALID_ARGUMENT"),
    ("int64-5000-digits", request("POST", JOBS, {"jobId": "big", "trainingInput": {"workerCount": "9" * 5000}}),
     400, "INVALID_ARGUMENT"),
    ("int64-as-float-inf", request("POST", JOBS, '{"jobId": "big", "trainingInput": {"workerCount": 1e999}}'),
     400, "INVALID_ARGUMENT"),
    ("body-not-utf8", request("POST", JOBS, b'{"jobId": "\xff\xfe"}'), 400, "INVALID_ARGUMENT"),
    ("body-utf16", request("POST", JOBS, '{"jobId": "x"}'.encode("utf-16")), 400, "INVALID_ARGUMENT"),
    ("body-a-list", request("POST", JOBS, "[]"), 400, "INVALID_ARGUMENT"),
    ("body-a-string", request("POST", JOBS, '"job"'), 400, "INVALID_ARGUMENT"),
    ("body-empty", request("POST", JOBS, ""), 400, "INVALID_ARGUMENT"),
    ("body-truncated", request("POST", JOBS, '{"jobId": "x", "trainingInput": {'), 400, "INVALID_ARGUMENT"),
    ("job-id-trailing-newline", request("POST", JOBS, {"jobId": "my_job\n", "trainingInput": {}}), 400,
     "INVALID_ARGUMENT"),
    ("job-id-nul", request("POST", JOBS, {"jobId": "my\u0000job", "trainingInput": {}}), 400, "INVALID_ARGUMENT"),
    ("job-id-129", request("POST", JOBS, {"jobId": "j" * 129, "trainingInput": {}}), 400, "INVALID_ARGUMENT"),
    ("job-dir-dot-dot", request("POST", JOBS, {"jobId": "dots", "trainingInput": {
        "region": "us-central1", "jobDir": "gs://my-bucket/../etc"}}), 400, "INVALID_ARGUMENT"),
    ("arg-200-kib", request("POST", JOBS, {"jobId": "long_arg", "trainingInput": {
        "region": "us-central1", "args": ["x" * 200 * 1024]}}), 400, "INVALID_ARGUMENT"),
    ("arg-with-nul", request("POST", JOBS, {"jobId": "nul_arg", "trainingInput": {
        "region": "us-central1", "args": ["a\u0000b"]}}), 400, "INVALID_ARGUMENT"),
    ("project-uppercase", request("GET", "/v1/projects/Hostile/jobs"), 400, "INVALID_ARGUMENT"),
    ("project-underscore", request("GET", "/v1/projects/my_project/jobs"), 400, "INVALID_ARGUMENT"),
    ("project-too-short", request("GET", "/v1/projects/ab/jobs"), 400, "INVALID_ARGUMENT"),
    ("project-newline", request("GET", "/v1/projects/hostile-project%0A/jobs"), 400, "INVALID_ARGUMENT"),
    ("project-dot-dot-create", request("POST", "/v1/projects/../jobs", {"jobId": "x"}), 400, "INVALID_ARGUMENT"),
    ("project-bad-on-vertex", request("GET", "/v1/projects/X/locations/us-central1/customJobs"), 400,
     "INVALID_ARGUMENT"),
    ("page-token-garbage", request("GET", f"{JOBS}?pageToken=%25%25%25"), 400, "INVALID_ARGUMENT"),
    ("page-token-not-json", request("GET", f"{JOBS}?pageToken={token(b'not json')}"), 400, "INVALID_ARGUMENT"),
    ("page-token-json-list", request("GET", f"{JOBS}?pageToken={token(b'[1, 2]')}"), 400, "INVALID_ARGUMENT"),
    ("page-token-binary", request("GET", f"{JOBS}?pageToken={token(bytes(range(40)))}"), 400, "INVALID_ARGUMENT"),
    ("page-token-vertex-garbage", request("GET", f"{CUSTOM}?pageToken=@@@"), 400, "INVALID_ARGUMENT"),
    ("page-size-text", request("GET", f"{JOBS}?pageSize=many"), 400, "INVALID_ARGUMENT"),
    ("page-size-negative", request("GET", f"{JOBS}?pageSize=-1"), 400, "INVALID_ARGUMENT"),
    ("page-size-26-digits", request("GET", f"{JOBS}?pageSize=" + "9" * 26), 400, "INVALID_ARGUMENT"),
    ("page-size-int32-overflow", request("GET", f"{JOBS}?pageSize=2147483648"), 400, "INVALID_ARGUMENT"),
    ("page-size-vertex-26-digits", request("GET", f"{CUSTOM}?pageSize=" + "9" * 26), 400, "INVALID_ARGUMENT"),
    ("json-duplicate-job-id", request("POST", JOBS, '{"jobId": "first", "jobId": "second", "trainingInput": {}}'),
     400, "INVALID_ARGUMENT"),
    ("json-duplicate-nested-key", request("POST", JOBS, '{"jobId": "dup", "trainingInput": {"workerCount": "1", '
                                                        '"workerCount": "40"}}'), 400, "INVALID_ARGUMENT"),
    ("location-nul", request("GET", f"/v1/projects/{PROJECT}/locations/%00/customJobs"), 400, "INVALID_ARGUMENT"),
    ("location-uppercase", request("GET", f"/v1/projects/{PROJECT}/locations/US-CENTRAL1/customJobs"), 400,
     "INVALID_ARGUMENT"),
    ("location-dot-dot-create", request("POST", f"/v1/projects/{PROJECT}/locations/../customJobs", {}), 400,
     "INVALID_ARGUMENT"),
    ("location-newline", request("GET", f"/v1/projects/{PROJECT}/locations/us-central1%0A/customJobs"), 400,
     "INVALID_ARGUMENT"),
    ("method-options", request("OPTIONS", JOBS), 405, "INVALID_ARGUMENT"),
    ("method-trace", request("TRACE", JOBS), 405, "INVALID_ARGUMENT"),
    ("method-connect-like", request("PROPFIND", JOBS), 405, "INVALID_ARGUMENT"),
    ("filter-nested-parens", request("GET", f"{JOBS}?filter=" + "%28" * 3000 + "state%3DFAILED" + "%29" * 3000), 400,
     "INVALID_ARGUMENT"),
    # The filter language (job/filters.py) bounds a filter's length and refuses what it cannot parse.
    ("filter-30000-chars", request("GET", f"{JOBS}?filter=jobId%3A" + "a" * 30_000), 400, "INVALID_ARGUMENT"),
    ("filter-unclosed-quote", request("GET", f"{JOBS}?filter=jobId%3D%22abc"), 400, "INVALID_ARGUMENT"),
    ("filter-logging-30000-chars", request("POST", "/v2/entries:list", {
        "resourceNames": [f"projects/{PROJECT}"], "filter": 'resource.labels.job_id="x" AND ' + "a" * 30_000}),
     400, "INVALID_ARGUMENT"),
    ("filter-vertex-nested-not", request("GET", f"{CUSTOM}?filter=" + "NOT%20" * 3000 + "state%3DX"), 400,
     "INVALID_ARGUMENT"),
    ("logs-filter-nested", request("POST", "/v2/entries:list", {
        "resourceNames": [f"projects/{PROJECT}"], "filter": "(" * 3000 + "a=b" + ")" * 3000}), 400,
     "INVALID_ARGUMENT"),
    ("logs-filter-bad-timestamp", request("POST", "/v2/entries:list", {
        "resourceNames": [f"projects/{PROJECT}"],
        "filter": 'resource.labels.job_id="x" AND timestamp>="2024-13-45T99:99:99Z"'}), 400, "INVALID_ARGUMENT"),
    ("logs-page-token-garbage", request("POST", "/v2/entries:list", {
        "resourceNames": [f"projects/{PROJECT}"], "filter": 'resource.labels.job_id="x"', "pageToken": "!!"}),
     400, "INVALID_ARGUMENT"),
    ("logs-page-size-nan", request("POST", "/v2/entries:list", '{"resourceNames": ["projects/' + PROJECT
                                   + '"], "pageSize": NaN}'), 400, "INVALID_ARGUMENT"),
    ("logs-body-a-number", request("POST", "/v2/entries:list", "42"), 400, "INVALID_ARGUMENT"),
    ("ml-tuning-nan-string", request("POST", JOBS, tuning_job(minValue="-Infinity")), 400, "INVALID_ARGUMENT"),
    ("vertex-tuning-nan-literal", request("POST", TUNING, json.dumps(vertex_tuning_job(minValue=float("nan")))),
     400, "INVALID_ARGUMENT"),
    ("vertex-tuning-nan-string", request("POST", TUNING, vertex_tuning_job(maxValue="NaN")), 400,
     "INVALID_ARGUMENT"),
    ("vertex-tuning-deep", request("POST", TUNING, deep(200)), 400, "INVALID_ARGUMENT"),
    ("vertex-custom-nan-replicas", request("POST", CUSTOM, '{"displayName": "x", "jobSpec": {"workerPoolSpecs": '
                                                          '[{"replicaCount": NaN}]}}'), 400, "INVALID_ARGUMENT"),
    ("vertex-custom-inf-as-string", request("POST", CUSTOM, {"displayName": "x", "jobSpec": {"workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "diskSpec": {"bootDiskSizeGb": "Infinity"}}]}}), 400,
     "INVALID_ARGUMENT"),
    ("cancel-body-nan", request("POST", f"{JOBS}/nothing:cancel", '{"x": NaN}'), 400, "INVALID_ARGUMENT"),
    ("cancel-body-deep", request("POST", f"{JOBS}/nothing:cancel", deep(500)), 400, "INVALID_ARGUMENT"),
    ("get-missing-job-newline", request("GET", f"{JOBS}/my_job%0A"), 404, "NOT_FOUND"),
    ("unknown-route", request("GET", "/v1/projects/hostile-project/secrets"), 404, "NOT_FOUND"),
    ("unknown-method-put", request("PUT", JOBS, "{}"), 404, "NOT_FOUND"),
    ("unknown-method-delete", request("DELETE", f"{JOBS}/x"), 404, "NOT_FOUND"),
    ("path-traversal", request("GET", "/v1/../../etc/passwd"), 404, "NOT_FOUND"),
    ("headers-never-ending", f"GET {JOBS} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
     + b"".join(b"X-Padding-%d: %s\r\n" % (index, b"p" * 1000) for index in range(200)), 400, None),
    ("request-line-garbage", b"\x00\x01\x02 nonsense\r\n\r\n", 400, None),
    ("http-version-bogus", f"GET {JOBS} HTTP/9.9\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(), 200, ""),
    ("content-length-negative", f"POST {JOBS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n"
     .encode(), 400, None),
    ("content-length-twice", f"POST {JOBS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
     "Content-Length: 9\r\n\r\n{{}}".encode(), 400, None),
]


def _slow_headers(server: Server) -> bytes:
    """One byte of the request line at a time, slower than the head deadline allows."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        started = time.monotonic()
        for byte in f"GET {JOBS} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode():
            try:
                connection.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.2)
            if time.monotonic() - started > 6 * SHORT_TIMEOUT:
                break
        return b"closed" if _read_response(connection) == b"" else b"answered"


def _slow_body(server: Server) -> bytes:
    """Headers at once, then a body that never completes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        connection.sendall(request("POST", JOBS, b"", length=100)[:-0 or None] + b'{"jobId": ')
        return _read_response(connection)


def _idle_connections(server: Server) -> bytes:
    """Connections that send nothing are closed by the head deadline; none of them blocks others."""
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=30) for _ in range(6)]
    try:
        time.sleep(SHORT_TIMEOUT * 2)
        closed = sum(1 for connection in idle if _read_response(connection) == b"")
        answer = server.exchange(request("GET", JOBS))
        return answer if closed == len(idle) else b"idle connections were kept"
    finally:
        for connection in idle:
            connection.close()


EXCHANGES += [
    ("slow-headers-one-byte-at-a-time", _slow_headers, 0, "closed"),
    ("slow-body-never-completes", _slow_body, 408, "DEADLINE_EXCEEDED"),
    ("idle-connections-closed", _idle_connections, 200, ""),
]


def test_the_table_is_large_and_its_ids_unique() -> None:
    assert len(EXCHANGES) >= 60
    assert len({case[0] for case in EXCHANGES}) == len(EXCHANGES)


@pytest.mark.parametrize(("exchange", "status", "rpc_status"), [case[1:] for case in EXCHANGES],
                         ids=[case[0] for case in EXCHANGES])
def test_hostile_request_is_answered_cleanly(server: Server, exchange: Exchange, status: int,
                                             rpc_status: str | None) -> None:
    answer = exchange(server) if callable(exchange) else server.exchange(exchange)
    if status == 0:  # the server hung up on it
        assert answer == rpc_status.encode() if rpc_status else b""
        return
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    if not rpc_status:
        return  # None: uvicorn refused it before the app saw a request (plain text, as any HTTP
        # server does); "": a success, e.g. a filter that is long but harmless
    error = json.loads(body)["error"]
    assert error["code"] == status
    assert error["status"] == rpc_status
    assert isinstance(error["message"], str) and error["message"]


def test_after_the_table_every_project_still_lists(server: Server) -> None:
    for path in (JOBS, CUSTOM, TUNING):
        answer = server.exchange(request("GET", path))
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


def test_the_server_names_the_body_limit(server: Server) -> None:
    answer = server.exchange(request("POST", JOBS, b" " * (limits.MAX_BODY_BYTES + 1)))
    assert f"exceeds the limit: {limits.MAX_BODY_BYTES} bytes".encode() in answer
