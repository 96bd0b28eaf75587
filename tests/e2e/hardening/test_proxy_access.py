"""Who may use `local serve`'s proxy, and what it will and will not answer, with raw sockets.

The proxy asks for its credentials (407 without), serves its own user only (another user cannot
use it even with them, nor read its CA's key or the record that holds them), shows a certificate
only for the Google hosts it serves (signed by a CA nothing else trusts), refuses the Google hosts
it does not serve (501), and tunnels every other host unchanged. Behind it, Google's names are
taken as Host on the proxied port only, the token refresh answers only the file `local serve`
wrote, and `aiptrain local env` refuses a server that is not running.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiptrain._emulator.projects import project_number_for
from aiptrain._emulator.proxy_ca import ProxyAuthority
from tests.emulator.proxy_clients import client_environment
from tests.fixtures.emulator import REPO, Emulator, running_emulator
from tests.fixtures.other_user import SYSTEM_PYTHON, as_nobody


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with running_emulator(tmp_path_factory.mktemp("proxy-home")) as emulator:
        yield emulator


def proxy_of(emulator: Emulator) -> tuple[int, str]:
    """(the proxy's port, its Proxy-Authorization header value)."""
    variables = client_environment(emulator)
    pair = f"{variables['CLOUDSDK_PROXY_USERNAME']}:{variables['CLOUDSDK_PROXY_PASSWORD']}"
    return int(variables["CLOUDSDK_PROXY_PORT"]), "Basic " + base64.b64encode(pair.encode()).decode()


def connect(port: int, target: str, authorization: str | None) -> tuple[socket.socket, int, str]:
    """CONNECT target through the proxy: (the socket, the status, the answer's body)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    header = f"Proxy-Authorization: {authorization}\r\n" if authorization else ""
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{header}\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1])
    lengths = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = lengths[0] if lengths else 0
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return sock, status, body.decode()


def bundle_of(emulator: Emulator) -> str:
    return client_environment(emulator)["REQUESTS_CA_BUNDLE"]


def test_a_client_without_the_proxys_credentials_gets_407(served: Emulator) -> None:
    port, good = proxy_of(served)
    wrong = "Basic " + base64.b64encode(b"aiptrain:wrong").decode()
    for authorization in (None, wrong, good.replace("Basic", "Bearer")):
        sock, status, body = connect(port, "ml.googleapis.com:443", authorization)
        sock.close()
        assert status == 407, (authorization, body)
        assert "aiptrain local env" in body


def test_a_served_google_host_gets_a_certificate_for_exactly_its_name(served: Emulator) -> None:
    port, authorization = proxy_of(served)
    sock, status, _ = connect(port, "us-central1-aiplatform.googleapis.com:443", authorization)
    assert status == 200
    context = ssl.create_default_context(cafile=bundle_of(served))
    with context.wrap_socket(sock, server_hostname="us-central1-aiplatform.googleapis.com") as secured:
        certificate: Any = secured.getpeercert()
    assert certificate["subjectAltName"] == (("DNS", "us-central1-aiplatform.googleapis.com"),)
    assert "aiptrain" in dict(part[0] for part in certificate["issuer"])["commonName"]
    # Nothing but a process given the bundle trusts it: the system's own store refuses it.
    sock, status, _ = connect(port, "ml.googleapis.com:443", authorization)
    with pytest.raises(ssl.SSLCertVerificationError):
        ssl.create_default_context().wrap_socket(sock, server_hostname="ml.googleapis.com")
    sock.close()


def test_an_unserved_google_host_gets_501_naming_it_and_what_is_served(served: Emulator) -> None:
    port, authorization = proxy_of(served)
    for target in ("compute.googleapis.com:443", "ml.googleapis.com:80", "evil-ml.googleapis.com:443"):
        sock, status, body = connect(port, target, authorization)
        sock.close()
        assert status == 501, (target, body)
        assert target.split(":")[0] in body and "aiplatform.googleapis.com" in body
    assert not (served.home / "emulator" / "proxy-ca" / "hosts" / "compute.googleapis.com.pem").exists()


@pytest.fixture
def local_tls_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A TLS echo server for `localhost` with a certificate of its own CA: (port, that CA)."""
    from aiptrain._gcs_endpoint.certificates import new_authority, sign_leaf

    ca, ca_key = new_authority("a host of its own")
    certificate, key = sign_leaf(ca, ca_key, ("localhost",))
    (tmp_path / "ca.pem").write_bytes(ca)
    (tmp_path / "chain.pem").write_bytes(certificate + ca)
    (tmp_path / "key.pem").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "chain.pem", tmp_path / "key.pem")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with context.wrap_socket(connection, server_side=True) as secured:
            secured.sendall(secured.recv(100).upper())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], tmp_path / "ca.pem"
    listener.close()
    thread.join(timeout=10)


def test_another_host_is_tunnelled_unchanged_and_gets_no_certificate(served: Emulator,
                                                                       local_tls_server: tuple[int, Path]) -> None:
    port, authorization = proxy_of(served)
    target_port, own_ca = local_tls_server
    sock, status, _ = connect(port, f"localhost:{target_port}", authorization)
    assert status == 200
    # The host's own certificate arrives, verified against its own CA only: the proxy did not step in.
    with ssl.create_default_context(cafile=str(own_ca)).wrap_socket(sock, server_hostname="localhost") as secured:
        secured.sendall(b"through the tunnel")
        assert secured.recv(100) == b"THROUGH THE TUNNEL"
    assert not (served.home / "emulator" / "proxy-ca" / "hosts" / "localhost.pem").exists()
    with pytest.raises(ValueError, match="gets no certificate"):
        ProxyAuthority(served.home).server_context("pypi.org", ("http/1.1",))


def test_the_ca_key_and_the_proxy_credentials_are_private(served: Emulator) -> None:
    folder = served.home / "emulator" / "proxy-ca"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "ca-key.pem").stat().st_mode) == 0o600
    for path in (served.home / "emulator" / "tokens").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


NOBODY_CLIENT = r'''
import base64, json, socket, sys
port, authorization, key, record = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
answers = {}
for name, path in (("key", key), ("record", record)):
    try:
        open(path).read()
        answers[name] = "read"
    except OSError as error:
        answers[name] = type(error).__name__
sock = socket.create_connection(("127.0.0.1", port), timeout=30)
sock.sendall(("CONNECT ml.googleapis.com:443 HTTP/1.1\r\nProxy-Authorization: %s\r\n\r\n" % authorization).encode())
answers["connect"] = sock.recv(100).decode("latin-1").split(" ")[1]
print(json.dumps(answers))
'''


def _nobody_asks(served: Emulator, *prefix: str) -> dict[str, Any]:
    port, authorization = proxy_of(served)
    record = next((served.home / "emulator" / "tokens").glob("*.serve.json"))
    done = subprocess.run([*prefix, SYSTEM_PYTHON, "-c", NOBODY_CLIENT, str(port), authorization,
                           str(served.home / "emulator" / "proxy-ca" / "ca-key.pem"), str(record)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    answers: dict[str, Any] = json.loads(done.stdout)
    return answers


def test_another_user_can_neither_use_the_proxy_nor_read_its_secrets(served: Emulator) -> None:
    # Even given the credentials (which it cannot read), another user's connection is refused.
    assert _nobody_asks(served, *as_nobody()) == {"key": "PermissionError", "record": "PermissionError",
                                                   "connect": "403"}
    assert _nobody_asks(served) == {"key": "read", "record": "read", "connect": "200"}


def test_google_names_are_a_host_only_through_the_proxy(served: Emulator) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    connection.request("GET", "/v1/projects/p/jobs", headers={"Host": "ml.googleapis.com",
                                                              "Authorization": f"Bearer {served.token}"})
    response = connection.getresponse()
    assert response.status == 400
    assert "not a name of this aiptrain emulator" in json.loads(response.read())["error"]["message"]


def _through_proxy(served: Emulator, host: str, method: str, path: str, body: bytes | None = None,
                   headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    port, authorization = proxy_of(served)
    context = ssl.create_default_context(cafile=bundle_of(served))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    connection.set_tunnel(host, 443, headers={"Proxy-Authorization": authorization})
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    answer = json.loads(response.read() or b"{}")
    connection.close()
    return response.status, answer


def test_the_token_refresh_answers_the_credentials_file_only(served: Emulator) -> None:
    credentials = json.loads(Path(client_environment(served)["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    assert credentials["type"] == "authorized_user" and credentials["token"] == served.token
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    status, answer = _through_proxy(served, "oauth2.googleapis.com", "POST", "/token",
                                    f"grant_type=refresh_token&refresh_token={credentials['refresh_token']}".encode(),
                                    form)
    assert status == 200 and answer["access_token"] == served.token
    status, answer = _through_proxy(served, "oauth2.googleapis.com", "POST", "/token",
                                    b"grant_type=refresh_token&refresh_token=guessed", form)
    assert status == 400 and answer["error"] == "invalid_grant" and "access_token" not in answer


def test_projects_get_answers_the_emulators_project_number_behind_the_token(served: Emulator) -> None:
    bearer = {"Authorization": f"Bearer {served.token}"}
    status, project = _through_proxy(served, "cloudresourcemanager.googleapis.com", "GET", "/v1/projects/p-one",
                                     headers=bearer)
    assert status == 200 and project["projectNumber"] == project_number_for("p-one")
    status, _ = _through_proxy(served, "cloudresourcemanager.googleapis.com", "GET", "/v1/projects/p-one")
    assert status == 401
    # Each host answers its own API only: the console is not on ml.googleapis.com.
    status, answer = _through_proxy(served, "ml.googleapis.com", "GET", "/", headers=bearer)
    assert status == 404 and "ml.googleapis.com" in answer["error"]["message"]


def test_local_env_without_a_running_server_is_a_usage_error(tmp_path: Path) -> None:
    for extra in ([], ["--port", "9"]):
        done = subprocess.run([sys.executable, "-m", "aiptrain", "local", "env", *extra], cwd=REPO,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "AIPTRAIN_HOME": str(tmp_path)})
        assert done.returncode == 2, done
        assert "no `aiptrain local serve` with its proxy is running" in done.stderr and not done.stdout


def test_without_the_proxy_there_is_no_record_and_local_env_says_so(tmp_path: Path) -> None:
    with running_emulator(tmp_path / "home", proxy=False) as emulator:
        tokens = emulator.home / "emulator" / "tokens"
        assert sorted(path.name for path in tokens.iterdir()) == [str(emulator.port),
                                                                   f"{emulator.port}.credentials.json"]
        done = subprocess.run([sys.executable, "-m", "aiptrain", "local", "env", "--port", str(emulator.port)],
                              cwd=REPO, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "AIPTRAIN_HOME": str(emulator.home)})
        assert done.returncode == 2 and "with its proxy" in done.stderr


class _RecordingProxy:
    """A CONNECT proxy such as a machine's own: it notes each request's head and answers 200, then
    echoes what comes through the tunnel in upper case."""

    def __init__(self) -> None:
        self.heads: list[str] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        with connection:
            head = b""
            while b"\r\n\r\n" not in head:
                head += connection.recv(1)
            self.heads.append(head.decode())
            connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            connection.sendall(connection.recv(100).upper())

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=10)


def test_other_hosts_go_through_the_proxy_the_environment_had(tmp_path: Path) -> None:
    upstream = _RecordingProxy()
    try:
        url = f"http://ci:s3cret@127.0.0.1:{upstream.port}"
        with running_emulator(tmp_path / "home", env={"https_proxy": url, "HTTPS_PROXY": url, "no_proxy": "",
                                                       "NO_PROXY": ""}) as emulator:
            port, authorization = proxy_of(emulator)
            sock, status, _ = connect(port, "pypi.example:443", authorization)
            assert status == 200
            sock.sendall(b"hello")
            assert sock.recv(100) == b"HELLO"
            sock.close()
    finally:
        upstream.close()
    assert len(upstream.heads) == 1
    assert upstream.heads[0].startswith("CONNECT pypi.example:443 HTTP/1.1\r\n")
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'ci:s3cret').decode()}" in upstream.heads[0]


def test_a_server_without_a_token_still_gives_clients_credentials_to_send(tmp_path: Path) -> None:
    with running_emulator(tmp_path / "home", no_auth=True) as emulator:
        variables = client_environment(emulator)
        credentials = json.loads(Path(variables["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
        assert credentials["type"] == "authorized_user" and credentials["token"]
        assert variables["CLOUDSDK_AUTH_DISABLE_CREDENTIALS"] == "true"
        assert "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE" not in variables
