"""The job's metadata server, asked by real clients: google-auth's `default()` and its compute-engine
credentials, the Cloud SDK's gsutil with a boto `service_account = default` (through the storage
endpoint, its `http_proxy`), and plain HTTP for what the VM's server answered; the storage endpoint
takes the tokens it issues and no others."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiptrain._gcs_endpoint.metadata import vm_identity
from aiptrain._gcs_endpoint.service import (
    JobMetadata,
    ReplicaStorage,
    host_endpoints,
    job_metadata_server,
    replica_base_environment,
    replica_storage,
)
from aiptrain._job.catalog import load_catalog
from aiptrain._job.project_id import project_number_for
from aiptrain._replicas.settings import ReplicaSettings
from aiptrain.errors import UsageError

PROJECT = "era-project"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[JobMetadata, ReplicaStorage]]:
    data = tmp_path / "storage" / "vmbucket" / "in"
    data.mkdir(parents=True)
    (data / "a.csv").write_text("x\n1\n")
    identity = vm_identity(PROJECT, "job_1", "us-east1", None, load_catalog())
    with job_metadata_server(identity, tmp_path, lambda _line: None) as metadata, \
            replica_storage(tmp_path, tmp_path / "storage", "endpoint", lambda _line: None,
                            metadata=metadata.server if metadata else None) as storage:
        assert storage is not None and metadata is not None
        yield metadata, storage


def _get(address: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    host, port = address.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("GET", path, headers=headers or {})
    answer = connection.getresponse()
    return answer.status, answer.read().decode(), {k.lower(): v for k, v in answer.getheaders()}


FLAVOR = {"Metadata-Flavor": "Google"}


def test_the_vm_is_the_jobs_project_zone_and_the_services_own_agent(
        servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    address = servers[0].server.address
    number = project_number_for(PROJECT)
    assert _get(address, "/computeMetadata/v1/project/project-id", FLAVOR)[:2] == (200, PROJECT)
    assert _get(address, "/computeMetadata/v1/project/numeric-project-id", FLAVOR)[1] == number
    assert _get(address, "/computeMetadata/v1/instance/zone", FLAVOR)[1] == f"projects/{number}/zones/us-east1-b"
    assert _get(address, "/computeMetadata/v1/instance/region", FLAVOR)[1] == f"projects/{number}/regions/us-east1"
    status, body, headers = _get(address, "/computeMetadata/v1/instance/service-accounts/default/?recursive=true",
                                 FLAVOR)
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"aliases": ["default"], "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
                                "email": f"service-{number}@cloud-ml.google.com.iam.gserviceaccount.com"}
    listed = _get(address, "/computeMetadata/v1/instance/service-accounts/", FLAVOR)[1].splitlines()
    assert listed == ["default/", f"service-{number}@cloud-ml.google.com.iam.gserviceaccount.com/"]
    # As on the VM: the ping answers with its flavour, and data needs the header (and no forwarding).
    assert _get(address, "/")[2]["metadata-flavor"] == "Google"
    assert _get(address, "/computeMetadata/v1/project/project-id")[0] == 403
    assert _get(address, "/computeMetadata/v1/project/project-id", {**FLAVOR, "X-Forwarded-For": "1.2.3.4"})[0] == 403
    assert _get(address, "/computeMetadata/v1/instance/nothing-here", FLAVOR)[0] == 404


def test_a_jobs_service_account_is_the_vms(tmp_path: Path) -> None:
    identity = vm_identity(PROJECT, "job_2", "europe-west4", "trainer@era-project.iam.gserviceaccount.com",
                           load_catalog())
    with job_metadata_server(identity, tmp_path, lambda _line: None) as metadata:
        assert metadata is not None
        address = metadata.server.address
        assert _get(address, "/computeMetadata/v1/instance/service-accounts/default/email", FLAVOR)[1] == \
            "trainer@era-project.iam.gserviceaccount.com"
        assert _get(address, "/computeMetadata/v1/instance/zone", FLAVOR)[1].endswith("/zones/europe-west4-a")
    assert not list((tmp_path / "tmp").iterdir())  # the replicas' gcloud configuration went with the job


GOOGLE_AUTH = r'''
import json, sys
import google.auth, requests
from google.auth.transport.requests import AuthorizedSession, Request
credentials, project = google.auth.default()
credentials.refresh(Request())
session = AuthorizedSession(credentials)
listed = session.get(sys.argv[1] + "/storage/v1/b/vmbucket/o")
forged = requests.get(sys.argv[1] + "/storage/v1/b/vmbucket/o", headers={"Authorization": "Bearer ya29.not-this-jobs"})
print(json.dumps({"kind": type(credentials).__module__, "project": project, "email": credentials.service_account_email,
                  "listed": listed.status_code, "names": [i["name"] for i in listed.json().get("items", [])],
                  "forged": forged.status_code, "forged_reason": forged.json()["error"]["errors"][0]["reason"]}))
'''


def test_google_auth_default_finds_the_vm_and_its_token_opens_the_storage_endpoint_only(
        servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    metadata, storage = servers
    env = replica_base_environment({**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json"},
                                   storage, metadata)
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in env  # the user's own credentials stay out of the job
    assert Path(env["CLOUDSDK_CONFIG"]).is_dir() and not list(Path(env["CLOUDSDK_CONFIG"]).iterdir())
    done = subprocess.run([sys.executable, "-c", GOOGLE_AUTH, storage.endpoint],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    number = project_number_for(PROJECT)
    assert found["kind"] == "google.auth.compute_engine.credentials" and found["project"] == PROJECT
    assert found["email"] == f"service-{number}@cloud-ml.google.com.iam.gserviceaccount.com"
    assert (found["listed"], found["names"]) == (200, ["in/a.csv"])
    assert (found["forged"], found["forged_reason"]) == (401, "authError")


def test_tensorflows_bearer_token_is_one_the_endpoint_issued(servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    metadata, storage = servers
    env = storage.environment({})
    assert metadata.server.tokens.accepts(env["GOOGLE_AUTH_TOKEN_FOR_TESTING"])
    through = {"Authorization": f"Bearer {env['GOOGLE_AUTH_TOKEN_FOR_TESTING']}"}
    assert _get(storage.endpoint, "/storage/v1/b/vmbucket/o", through)[0] == 200
    assert _get(storage.endpoint, "/storage/v1/b/vmbucket/o", {"Authorization": "Bearer aiptrain.guess"})[0] == 401
    assert _get(storage.endpoint, "/storage/v1/b/vmbucket/o")[0] == 200  # no credentials, as emulator clients send


def test_clients_that_know_only_the_metadata_host_reach_it_through_the_storage_endpoint(
        servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    _metadata, storage = servers
    env = replica_base_environment({}, storage, _metadata)
    assert env["http_proxy"] == env["HTTP_PROXY"] == storage.endpoint
    for name in ("metadata.google.internal", "metadata", "169.254.169.254"):
        status, body, _headers = _get(storage.endpoint, f"http://{name}/computeMetadata/v1/project/project-id", FLAVOR)
        assert (status, body) == (200, PROJECT)
    status, body, _headers = _get(storage.endpoint, "http://example.com/", FLAVOR)
    assert status == 403 and "NO_PROXY" in body


def test_every_client_is_told_where_the_vms_server_is(servers: tuple[JobMetadata, ReplicaStorage]) -> None:
    metadata, storage = servers
    env = replica_base_environment({"NO_PROXY": "corp.example"}, storage, metadata)
    address = metadata.server.address
    # google-auth (and its first releases), oauth2client, gcloud, apitools; the ping.
    assert env["GCE_METADATA_HOST"] == env["GCE_METADATA_ROOT"] == env["GCE_METADATA_IP"] == address
    assert env["NO_PROXY"].split(",") == ["localhost", "127.0.0.1", "::1", "corp.example"]
    relayed = {endpoint.name: endpoint for endpoint in host_endpoints(storage, metadata)}
    assert f"{relayed['metadata'].host}:{relayed['metadata'].port}" == address
    # A relayed replica reaches each server at its own address: the same variables lead it there.
    assert relayed["metadata"].environment["GCE_METADATA_HOST"] == address
    assert relayed["storage"].environment["STORAGE_EMULATOR_HOST"] == storage.endpoint
    assert relayed["storage"].environment["http_proxy"] == storage.endpoint  # the metadata host's name, too


@pytest.mark.slow
def test_gsutil_with_a_boto_service_account_default_uses_the_vms_token(
        servers: tuple[JobMetadata, ReplicaStorage], tmp_path: Path) -> None:
    assert shutil.which("gsutil"), "the Google Cloud CLI (gsutil) is installed on every machine of this project"
    metadata, storage = servers
    boto = tmp_path / "boto.cfg"
    boto.write_text("[GoogleCompute]\nservice_account = default\n")  # as on a Compute Engine image
    env = replica_base_environment(os.environ, storage, metadata)
    env.pop("CLOUDSDK_AUTH_DISABLE_CREDENTIALS")
    env["BOTO_CONFIG"] = str(boto)
    seen: list[str] = []
    answer = metadata.server.answer

    def spied(path: str, query: dict[str, str], headers: dict[str, str]) -> Any:
        seen.append(urllib.parse.unquote(path))
        return answer(path, query, headers)

    metadata.server.answer = spied  # type: ignore[method-assign]
    done = subprocess.run(["gsutil", "ls", "gs://vmbucket/in/"], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["gs://vmbucket/in/a.csv"]
    assert "/" in seen  # the boto plugin's ping of http://metadata.google.internal, through the endpoint
    assert "/computeMetadata/v1/instance/service-accounts/default/token" in seen


def test_with_the_metadata_server_off_the_replicas_keep_the_submitters_credentials(tmp_path: Path) -> None:
    identity = vm_identity(PROJECT, "job_3", "us-central1", None, load_catalog())
    with job_metadata_server(identity, tmp_path, lambda _line: None, enabled=False) as metadata:
        assert metadata is None
        env = replica_base_environment({"GOOGLE_APPLICATION_CREDENTIALS": "/keys/mine.json"}, None, metadata)
    assert env == {"GOOGLE_APPLICATION_CREDENTIALS": "/keys/mine.json"}
    assert ReplicaSettings.from_env({"AIPTRAIN_LOCAL_METADATA": "off"}).metadata == "off"
    assert ReplicaSettings.from_env({}).metadata == "on"
    with pytest.raises(UsageError, match="AIPTRAIN_LOCAL_METADATA='maybe' is not one of on, off"):
        ReplicaSettings.from_env({"AIPTRAIN_LOCAL_METADATA": "maybe"})


def test_an_idle_connection_is_closed_rather_than_holding_a_thread(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    import socket
    import time

    from aiptrain._gcs_endpoint import metadata as metadata_module

    monkeypatch.setattr(metadata_module, "IDLE_SECONDS", 0.5, raising=False)
    identity = vm_identity(PROJECT, "idle", "us-east1", None, load_catalog())
    with metadata_module.MetadataServer(identity) as server:
        host, port = server.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as idle:
            started = time.monotonic()
            assert idle.recv(1) == b""  # the server hung up (a timeout here: it waits forever)
            assert time.monotonic() - started < 5
        status, body, _ = _get(server.address, "/computeMetadata/v1/project/project-id", FLAVOR)
        assert (status, body) == (200, PROJECT)  # a client that speaks is served as before
