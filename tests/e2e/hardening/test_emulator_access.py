"""Who may use `aiptrain local serve`: a table of requests a web page, a DNS-rebinding page or
another local process could send, against the real command (`python -m aiptrain local serve`),
with raw sockets so that nothing tidies the Host, Origin or Content-Type headers.

The server is started as a user would start it, with no token option: it makes one up, writes it
to a 0600 file under AIPTRAIN_HOME, and aiptrain's own client finds it there.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aiptrain._paths import serve_token_path

PROJECT = "access-project"
JOBS = f"/v1/projects/{PROJECT}/jobs"
PACKAGE = "gs://access-bucket/packages/trainer-0.1.tar.gz"
# The attack of the report: a stdlib module, no package, code in the arguments.
EXPLOIT = {"jobId": "pwn", "trainingInput": {"region": "us-central1", "pythonModule": "timeit",
                                             "args": ["-s", "open('pwned','w').write('x')", "pass"]}}


@dataclass
class Served:
    process: subprocess.Popen[str]
    home: Path
    port: int
    announced: str

    @property
    def token_file(self) -> Path:
        return serve_token_path(self.port, self.home)

    def exchange(self, raw: bytes) -> tuple[int, dict[str, str], Any]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as connection:
            connection.sendall(raw)
            data = b""
            while chunk := connection.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {name.strip().lower(): value.strip()
                   for name, _, value in (line.partition(":") for line in lines[1:])}
        return status, headers, json.loads(body) if body else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_serving(home: Path, *extra: str, env: dict[str, str] | None = None) -> Served:
    home.mkdir(parents=True, exist_ok=True)
    process_env = {**os.environ, "AIPTRAIN_HOME": str(home), **(env or {})}
    process_env.pop("AIPTRAIN_SERVE_TOKEN", None)
    process = subprocess.Popen([sys.executable, "-m", "aiptrain", "local", "serve", "--port", "0", *extra],
                               env=process_env, stderr=subprocess.PIPE, text=True, cwd=home)
    assert process.stderr is not None
    announced = ""
    while "--api-endpoint" not in announced:  # the last line of the announcement
        line = process.stderr.readline()
        if not line:
            break
        announced += line
    if "--gcloud-config" in extra:
        announced += process.stderr.readline() + process.stderr.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", announced)
    assert found, announced
    return Served(process, home, int(found.group(1)), announced)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = tmp_path_factory.mktemp("access-home")
    package = home / "storage" / PACKAGE.removeprefix("gs://")
    package.parent.mkdir(parents=True)
    package.write_bytes(b"not really a package; the table's jobs never start")
    server = start_serving(home)
    yield server
    server.stop()


def raw(method: str, path: str, body: bytes | str | dict[str, Any] = b"", *, token: bool = True,
        headers: dict[str, str] | None = None, host: str | None = "127.0.0.1:{port}",
        content_type: str | None = "application/json", version: str = "1.1") -> Any:
    """A request for the table; `{port}` and `{token}` are filled in when it is sent."""
    payload = json.dumps(body).encode() if isinstance(body, dict) else body.encode() if isinstance(body, str) else body
    lines = [f"{method} {path} HTTP/{version}", "Connection: close", f"Content-Length: {len(payload)}"]
    if host is not None:
        lines.append(f"Host: {host}")
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if token:
        lines.append("Authorization: Bearer {token}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n", payload)


def send(served: Served, request: Any) -> tuple[int, dict[str, str], Any]:
    head, payload = request
    token = served.token_file.read_text()
    return served.exchange(head.replace("{port}", str(served.port)).replace("{token}", token).encode() + payload)


def cluster(workers: str, **extra: Any) -> dict[str, Any]:
    return {"jobId": "big_cluster", "trainingInput": {
        "scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": workers,
        "region": "us-central1", "runtimeVersion": "2.11", "pythonModule": "trainer.task", "packageUris": [PACKAGE],
        **extra}}


# (case id, request, HTTP status, google.rpc status)
CASES: list[tuple[str, Any, int, str]] = [
    ("no-token", raw("GET", JOBS, token=False), 401, "UNAUTHENTICATED"),
    ("wrong-token", raw("GET", JOBS, token=False, headers={"Authorization": "Bearer guessed"}), 401,
     "UNAUTHENTICATED"),
    ("token-as-basic-auth", raw("GET", JOBS, token=False, headers={"Authorization": "Basic {token}"}), 401,
     "UNAUTHENTICATED"),
    ("token-in-the-query", raw("GET", JOBS + "?access_token={token}", token=False), 401, "UNAUTHENTICATED"),
    ("token-with-a-suffix", raw("GET", JOBS, token=False, headers={"Authorization": "Bearer {token}x"}), 401,
     "UNAUTHENTICATED"),
    ("host-rebound-name", raw("GET", JOBS, host="attacker.example:{port}"), 400, "INVALID_ARGUMENT"),
    ("host-loopback-prefix", raw("GET", JOBS, host="127.0.0.1.attacker.example:{port}"), 400, "INVALID_ARGUMENT"),
    ("host-missing-http-1.0", raw("GET", JOBS, host=None, version="1.0"), 400, "INVALID_ARGUMENT"),
    ("host-empty", raw("GET", JOBS, host=""), 400, "INVALID_ARGUMENT"),
    ("origin-foreign", raw("GET", JOBS, headers={"Origin": "http://attacker.example"}), 403, "PERMISSION_DENIED"),
    ("origin-null", raw("GET", JOBS, headers={"Origin": "null"}), 403, "PERMISSION_DENIED"),
    ("origin-other-local-port", raw("GET", JOBS, headers={"Origin": "http://127.0.0.1:1"}), 403,
     "PERMISSION_DENIED"),
    ("origin-https-same-host", raw("GET", JOBS, headers={"Origin": "https://127.0.0.1:{port}"}), 403,
     "PERMISSION_DENIED"),
    ("cors-preflight", raw("OPTIONS", JOBS, token=False, content_type=None, headers={
        "Origin": "http://attacker.example", "Access-Control-Request-Method": "POST"}), 403, "PERMISSION_DENIED"),
    ("options", raw("OPTIONS", JOBS, content_type=None), 405, "INVALID_ARGUMENT"),
    ("trace", raw("TRACE", JOBS, content_type=None), 405, "INVALID_ARGUMENT"),
    ("form-text-plain", raw("POST", JOBS, EXPLOIT, content_type="text/plain"), 415, "INVALID_ARGUMENT"),
    ("form-urlencoded", raw("POST", JOBS, "jobId=x", content_type="application/x-www-form-urlencoded"), 415,
     "INVALID_ARGUMENT"),
    ("form-multipart", raw("POST", JOBS, EXPLOIT, content_type="multipart/form-data; boundary=x"), 415,
     "INVALID_ARGUMENT"),
    ("body-without-content-type", raw("POST", JOBS, EXPLOIT, content_type=None), 415, "INVALID_ARGUMENT"),
    ("json-lookalike-type", raw("POST", JOBS, EXPLOIT, content_type="application/jsonx"), 415, "INVALID_ARGUMENT"),
    ("patch-text-plain", raw("PATCH", f"{JOBS}/x?updateMask=labels", {"labels": {}}, content_type="text/plain"), 415,
     "INVALID_ARGUMENT"),
    ("exploit-with-token-no-package", raw("POST", JOBS, EXPLOIT), 400, "INVALID_ARGUMENT"),
    ("workers-40-over-the-cap", raw("POST", JOBS, cluster("40")), 400, "INVALID_ARGUMENT"),
    ("workers-a-million", raw("POST", JOBS, cluster("1000000")), 400, "INVALID_ARGUMENT"),
    ("workers-negative", raw("POST", JOBS, cluster("-3")), 400, "INVALID_ARGUMENT"),
    ("parameter-servers-negative", raw("POST", JOBS, cluster("1", parameterServerCount="-1",
                                                              parameterServerType="n1-standard-4")), 400,
     "INVALID_ARGUMENT"),
    ("labels-10000", raw("POST", JOBS, {**cluster("1"), "labels": {f"k{i}": "v" for i in range(10_000)}}), 400,
     "INVALID_ARGUMENT"),
    ("package-missing", raw("POST", JOBS, cluster("1", packageUris=["gs://access-bucket/nothing.tar.gz"])), 400,
     "INVALID_ARGUMENT"),
    ("no-package", raw("POST", JOBS, cluster("1", packageUris=[])), 400, "INVALID_ARGUMENT"),
    ("vertex-replicas-over-the-cap", raw("POST", f"/v1/projects/{PROJECT}/locations/us-central1/customJobs", {
        "displayName": "big", "jobSpec": {"workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "pythonPackageSpec": {
                "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                "packageUris": [PACKAGE], "pythonModule": "trainer.task"}},
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "40", "pythonPackageSpec": {
                "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                "packageUris": [PACKAGE], "pythonModule": "trainer.task"}}]}}), 400, "INVALID_ARGUMENT"),
    # What must still work, so that the refusals above are not a server refusing everything.
    ("same-origin", raw("GET", JOBS, headers={"Origin": "http://127.0.0.1:{port}"}), 200, ""),
    ("host-localhost", raw("GET", JOBS, host="localhost:{port}"), 200, ""),
    ("host-without-port", raw("GET", JOBS, host="127.0.0.1"), 200, ""),
    ("json-with-charset", raw("POST", f"{JOBS}/missing:cancel", {}, content_type="application/json; charset=utf-8"),
     404, "NOT_FOUND"),
    ("cancel-without-body", raw("POST", f"{JOBS}/missing:cancel", b"", content_type=None), 404, "NOT_FOUND"),
]


def test_the_table_ids_are_unique() -> None:
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(("request_", "status", "rpc_status"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_request_is_refused_or_served(served: Served, request_: Any, status: int, rpc_status: str) -> None:
    code, headers, body = send(served, request_)
    assert code == status, body
    assert not [name for name in headers if name.startswith("access-control-")]  # no CORS, ever
    assert headers.get("content-type", "").startswith("application/json")
    if rpc_status:
        assert body["error"]["code"] == status
        assert body["error"]["status"] == rpc_status
        assert body["error"]["message"]


def test_after_the_table_no_job_exists_and_nothing_ran(served: Served) -> None:
    code, _, body = send(served, raw("GET", JOBS))
    assert (code, body) == (200, {})
    assert not (served.home / "pwned").exists()
    assert not any(served.home.rglob("pwned"))


def test_the_token_file_is_private_and_named_at_start(served: Served) -> None:
    mode = stat.S_IMODE(served.token_file.stat().st_mode)
    assert mode == 0o600
    assert str(served.token_file) in served.announced
    assert len(served.token_file.read_text()) >= 40


def test_the_announcement_names_the_proxy_once_before_the_endpoint_line(served: Served) -> None:
    # What `local env` needs is said once, before the endpoint line that ends what scripts wait for.
    proxy_lines = [line for line in served.announced.splitlines() if "aiptrain local env" in line]
    assert len(proxy_lines) == 1, served.announced
    assert served.announced.index(proxy_lines[0]) < served.announced.index("--api-endpoint")


def test_aiptrain_finds_the_token_itself(served: Served) -> None:
    env = {key: value for key, value in os.environ.items() if key != "AIPTRAIN_API_TOKEN"}
    env["AIPTRAIN_HOME"] = str(served.home)
    listed = subprocess.run([sys.executable, "-m", "aiptrain", "jobs", "list", "--backend", "mlv1", "--project",
                             PROJECT, "--api-endpoint", f"http://127.0.0.1:{served.port}/"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert served.token_file.read_text() not in listed.stderr + listed.stdout


def test_the_token_file_goes_with_the_server(tmp_path: Path) -> None:
    server = start_serving(tmp_path / "home")
    try:
        assert server.token_file.exists()
    finally:
        server.stop()
    assert not server.token_file.exists()


def test_gcloud_config_reads_the_token_file(tmp_path: Path) -> None:
    cloudsdk = tmp_path / "gcloud"
    server = start_serving(tmp_path / "home", "--gcloud-config", "aiptrain",
                           env={"CLOUDSDK_CONFIG": str(cloudsdk)})
    try:
        config = (cloudsdk / "configurations" / "config_aiptrain").read_text()
        assert f"access_token_file = {server.token_file}" in config
        assert "disable_credentials" not in config
    finally:
        server.stop()


def test_no_auth_says_what_it_allows_and_keeps_the_other_checks(tmp_path: Path) -> None:
    server = start_serving(tmp_path / "home", "--no-auth")
    try:
        assert "--no-auth" in server.announced and "run code as you" in server.announced
        assert not server.token_file.exists()
        assert server.exchange(b"GET " + JOBS.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close"
                               b"\r\n\r\n")[0] == 200
        assert server.exchange(b"GET " + JOBS.encode() + b" HTTP/1.1\r\nHost: attacker.example\r\n"
                               b"Connection: close\r\n\r\n")[0] == 400
        body = json.dumps(EXPLOIT).encode()
        form = (f"POST {JOBS} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                f"Origin: http://attacker.example\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        assert server.exchange(form)[0] == 403
    finally:
        server.stop()
    assert not any((tmp_path / "home").rglob("pwned"))


def test_no_auth_with_a_token_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("abc\n")
    done = subprocess.run([sys.executable, "-m", "aiptrain", "local", "serve", "--no-auth", "--token-file",
                           str(token_file)], env={**os.environ, "AIPTRAIN_HOME": str(tmp_path / "home")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--no-auth" in done.stderr


def test_a_server_that_cannot_start_leaves_no_token(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "aiptrain", "local", "serve", "--host", "192.0.2.1"],
                          env={**os.environ, "AIPTRAIN_HOME": str(tmp_path / "home")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert not (tmp_path / "home" / "emulator" / "tokens").exists() or not any(
        (tmp_path / "home" / "emulator" / "tokens").iterdir())


def test_reads_of_made_up_projects_write_nothing(served: Served) -> None:
    projects = served.home / "emulator" / "projects.json"
    before = projects.read_text() if projects.exists() else ""
    for index in range(60):
        code, _, _ = send(served, raw("GET", f"/v1/projects/made-up-{index:04d}/jobs"))
        assert code == 200
        code, _, _ = send(served, raw("GET", f"/v1/projects/made-up-{index:04d}/locations/us-central1/customJobs"))
        assert code == 200
    after = projects.read_text() if projects.exists() else ""
    assert after == before
    assert "made-up" not in after


def test_a_client_hanging_up_mid_body_leaves_no_traceback(tmp_path: Path) -> None:
    server = start_serving(tmp_path / "home")
    try:
        token = server.token_file.read_text()
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
                connection.sendall((f"POST {JOBS} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                    f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                                    "Content-Length: 5000\r\n\r\n{\"jobId\": ").encode())
        # The server still answers, and said nothing about the hang-ups.
        assert send(server, raw("GET", JOBS))[0] == 200
    finally:
        server.stop()
    assert server.process.stderr is not None
    log = server.process.stderr.read()
    assert "Traceback" not in log and "ClientDisconnect" not in log, log
