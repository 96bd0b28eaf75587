"""The job's metadata server answers its own user only: another user of the machine (`nobody`,
through `setpriv`) gets no token, project or service account from it, directly or through the
storage endpoint's proxy; the same requests from this test's own user are answered. Another
user's idle connections are turned away as they are accepted: they cannot hold the threads of the
process that runs the job."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiptrain._gcs_endpoint.metadata import vm_identity
from aiptrain._gcs_endpoint.service import JobMetadata, ReplicaStorage, job_metadata_server, replica_storage
from aiptrain._job.catalog import load_catalog
from tests.fixtures.other_user import SYSTEM_PYTHON, as_nobody

CLIENT = r'''
import http.client, json, sys

def call(port, path):
    connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    try:
        connection.request("GET", path, headers={"Metadata-Flavor": "Google"})
        response = connection.getresponse()
        return [response.status, response.read().decode("utf-8", "replace")[:200]]
    except OSError as error:
        return ["error", str(error)]

token = "/computeMetadata/v1/instance/service-accounts/default/token"
print(json.dumps({
    "token": call(sys.argv[1], token),
    "project": call(sys.argv[1], "/computeMetadata/v1/project/project-id"),
    "token-through-proxy": call(sys.argv[2], "http://metadata.google.internal" + token),
}))
'''


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[JobMetadata, ReplicaStorage]]:
    identity = vm_identity("guarded-project", "guarded", "us-central1", None, load_catalog())
    with job_metadata_server(identity, tmp_path, lambda _line: None) as metadata, \
            replica_storage(tmp_path, tmp_path / "storage", "endpoint", lambda _line: None,
                            metadata=metadata.server if metadata else None) as storage:
        assert storage is not None and metadata is not None
        yield metadata, storage


def _ask(servers: tuple[JobMetadata, ReplicaStorage], *prefix: str) -> dict[str, Any]:
    metadata, storage = servers
    done = subprocess.run([*prefix, SYSTEM_PYTHON, "-c", CLIENT, metadata.server.address.rsplit(":", 1)[1],
                           storage.endpoint.rsplit(":", 1)[1]], capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    answers: dict[str, Any] = json.loads(done.stdout)
    return answers


def test_another_user_gets_nothing_from_the_metadata_server(servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    answers = _ask(servers, *as_nobody())
    assert {name: answer[0] for name, answer in answers.items()} == dict.fromkeys(answers, 403), answers
    assert "another user" in answers["token"][1] and "access_token" not in json.dumps(answers)


def test_the_jobs_own_user_gets_its_token(servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    answers = _ask(servers)
    assert answers["project"] == [200, "guarded-project"]
    for name in ("token", "token-through-proxy"):
        status, body = answers[name]
        assert status == 200 and servers[0].server.tokens.accepts(json.loads(body)["access_token"])


IDLE_CROWD = r'''
import socket, sys, time
held = [socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30) for _ in range(int(sys.argv[2]))]
print("open", flush=True)
time.sleep(120)
'''


def test_another_users_idle_connections_hold_no_threads(servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    metadata, _ = servers
    before = threading.active_count()
    crowd = subprocess.Popen([*as_nobody(), SYSTEM_PYTHON, "-c", IDLE_CROWD,
                              metadata.server.address.rsplit(":", 1)[1], "100"],
                             stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert crowd.stdout is not None and crowd.stdout.readline().strip() == "open"
        time.sleep(2)  # the server has accepted them all by now
        assert threading.active_count() - before <= 3, f"{threading.active_count() - before} threads more"
    finally:
        crowd.kill()
        crowd.wait()
    assert _ask(servers)["project"] == [200, "guarded-project"]  # and the job's own user is still served
