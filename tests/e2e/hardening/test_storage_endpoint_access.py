"""The job's storage endpoint serves its own user only: another user of the machine (`nobody`,
through `setpriv`) can neither read, list, write nor delete an object, nor use it as a proxy.

The same requests from this test's own user are the control: they are served, so a refusal below
is the endpoint telling users apart, not a broken request.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiptrain._gcs_endpoint import peer
from aiptrain._gcs_endpoint.service import ReplicaStorage
from tests.fixtures.other_user import SYSTEM_PYTHON, as_nobody

SECRET = b"id,salary\n1,100\n"

# Stdlib only: it runs as `nobody`, under the system interpreter.
CLIENT = r'''
import http.client, json, socket, sys
port = int(sys.argv[1])

def call(method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return [response.status, response.read().decode("utf-8", "replace")[:200]]
    except OSError as error:
        return ["error", str(error)]

def connect():
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        raw.sendall(b"CONNECT www.googleapis.com:443 HTTP/1.1\r\nHost: www.googleapis.com:443\r\n\r\n")
        first = raw.recv(4096).split(b"\r\n")[0].decode()
    return [int(first.split()[1]), first]

print(json.dumps({
    "read": call("GET", "/download/storage/v1/b/bucket/o/data%2Fsecret.csv?alt=media"),
    "read-path-style": call("GET", "/bucket/data/secret.csv"),
    "metadata": call("GET", "/storage/v1/b/bucket/o/data%2Fsecret.csv"),
    "list": call("GET", "/storage/v1/b/bucket/o"),
    "write": call("POST", "/upload/storage/v1/b/bucket/o?uploadType=media&name=planted.txt", b"planted",
                  {"Content-Type": "text/plain"}),
    "delete": call("DELETE", "/storage/v1/b/bucket/o/data%2Fother.csv"),
    "proxy": connect(),
}))
'''


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[ReplicaStorage]:
    data = tmp_path / "storage" / "bucket" / "data"
    data.mkdir(parents=True)
    (data / "secret.csv").write_bytes(SECRET)
    (data / "other.csv").write_bytes(SECRET)
    with ReplicaStorage(tmp_path, tmp_path / "storage") as served:
        yield served


def run_client(endpoint: ReplicaStorage, *prefix: str) -> dict[str, Any]:
    port = endpoint.endpoint.rsplit(":", 1)[1]
    done = subprocess.run([*prefix, SYSTEM_PYTHON, "-c", CLIENT, port], capture_output=True, text=True, timeout=120,
                          cwd="/")
    assert done.returncode == 0, done.stderr
    answers: dict[str, Any] = json.loads(done.stdout)
    return answers



def test_another_user_is_refused_everything(endpoint: ReplicaStorage, tmp_path: Path) -> None:
    answers = run_client(endpoint, *as_nobody())
    assert {name: answer[0] for name, answer in answers.items()} == dict.fromkeys(answers, 403), answers
    assert "another user" in answers["read"][1]
    data = tmp_path / "storage" / "bucket" / "data"
    assert (data / "secret.csv").read_bytes() == SECRET
    assert (data / "other.csv").read_bytes() == SECRET  # not deleted
    assert not (tmp_path / "storage" / "bucket" / "planted.txt").exists()


def test_the_jobs_own_user_is_served(endpoint: ReplicaStorage, tmp_path: Path) -> None:
    answers = run_client(endpoint)
    assert answers["read"] == [200, SECRET.decode()]
    assert answers["read-path-style"][0] == 200
    assert answers["metadata"][0] == 200 and answers["list"][0] == 200
    assert answers["write"][0] == 200 and (tmp_path / "storage" / "bucket" / "planted.txt").read_bytes() == b"planted"
    assert answers["delete"][0] == 204 and not (tmp_path / "storage" / "bucket" / "data" / "other.csv").exists()
    assert answers["proxy"][0] == 200


def test_the_owner_of_a_connection_is_asked_of_the_kernel_by_address() -> None:
    """One netlink query per connection (not a read of the whole socket table), and the same answer
    as the table; a connection that does not exist has no owner."""
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, address = server.accept()
    try:
        served = server.getsockname()
        assert client.getsockname() == address
        assert peer._owner_by_netlink(socket.AF_INET, address, served) == os.geteuid()
        assert peer._owner_by_table(socket.AF_INET, address, served) == os.geteuid()
        assert peer.socket_owner(socket.AF_INET, ("127.0.0.1", 1), served) is None
    finally:
        for each in (accepted, client, server):
            each.close()
