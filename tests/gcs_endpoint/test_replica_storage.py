"""The replicas' storage endpoint, driven by real clients: google-cloud-storage over plain HTTP,
and an HTTPS client going through it as a proxy to Google's storage hosts (what TensorFlow does)."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import google_crc32c
import pytest
from google.api_core import exceptions
from google.cloud import storage  # type: ignore[import-untyped, unused-ignore]  # as in aiptrain/_storage/gcs.py

from aiptrain._gcs_endpoint.service import ReplicaStorage
from aiptrain._replicas.processes import start_process
from aiptrain._replicas.system_trust import TRUST_VARIABLE, system_bundles, trusting
from tests.fixtures.gcs import FakeGcsServer, fake_gcs_server

__all__ = ["fake_gcs_server"]


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplicaStorage]:
    (tmp_path / "storage" / "bucket" / "data").mkdir(parents=True)
    (tmp_path / "storage" / "bucket" / "data" / "a.csv").write_text("x,y\n1,2\n")
    with ReplicaStorage(tmp_path, tmp_path / "storage") as served:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", served.endpoint)
        yield served


def _client() -> storage.Client:
    return storage.Client(project="test")


def test_objects_written_through_the_endpoint_are_the_local_stores_files(
    endpoint: ReplicaStorage, tmp_path: Path
) -> None:
    root = tmp_path / "storage" / "bucket"
    bucket = _client().bucket("bucket")
    bucket.blob("out/small.txt").upload_from_string(b"small")  # multipart
    big = os.urandom(3 * 256 * 1024 + 17)
    blob = bucket.blob("out/deep/big.bin", chunk_size=256 * 1024)  # resumable, in 4 chunks
    blob.upload_from_string(big)
    assert (root / "out" / "small.txt").read_bytes() == b"small"
    assert (root / "out" / "deep" / "big.bin").read_bytes() == big
    assert bucket.blob("data/a.csv").download_as_bytes() == b"x,y\n1,2\n"  # a file put there by path
    assert bucket.blob("out/deep/big.bin").download_as_bytes(start=10, end=19) == big[10:20]
    assert not list((tmp_path / "storage").glob(".aiptrain-uploads/*")), "no upload left behind"
    bucket.copy_blob(bucket.blob("out/small.txt"), bucket, "out/copy.txt")
    assert (root / "out" / "copy.txt").read_bytes() == b"small"
    bucket.blob("out/copy.txt").delete()
    assert not (root / "out" / "copy.txt").exists()
    with pytest.raises(exceptions.NotFound):
        bucket.blob("out/copy.txt").download_as_bytes()


def test_listings_follow_the_api_prefixes_delimiters_and_pages(endpoint: ReplicaStorage, tmp_path: Path) -> None:
    root = tmp_path / "storage" / "bucket"
    for name in ("run/a.txt", "run/b.txt", "run/sub/c.txt", "run/sub/d/e.txt", "runner.txt"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / "run" / "empty").mkdir()
    (root / "run" / ".x.1234.partial").write_text("a write in progress")
    client = _client()
    everything = [b.name for b in client.list_blobs("bucket", prefix="run")]
    assert everything == ["run/a.txt", "run/b.txt", "run/empty/", "run/sub/c.txt", "run/sub/d/e.txt", "runner.txt"]
    iterator = client.list_blobs("bucket", prefix="run/", delimiter="/")
    assert [b.name for b in iterator] == ["run/a.txt", "run/b.txt"]
    assert sorted(iterator.prefixes) == ["run/empty/", "run/sub/"]
    pages = client.list_blobs("bucket", prefix="run/", page_size=2)
    assert [[b.name for b in page] for page in pages.pages] == [
        ["run/a.txt", "run/b.txt"], ["run/empty/", "run/sub/c.txt"], ["run/sub/d/e.txt"]]
    assert [b.name for b in client.list_blobs("bucket", prefix="nothing/")] == []
    # As everywhere in the local store, a bucket is a folder made on first write.
    assert list(client.list_blobs("not-written-yet")) == []
    with pytest.raises(exceptions.BadRequest, match="not a valid bucket name"):
        list(client.list_blobs("No_Such"))


def test_names_outside_the_store_and_clashes_are_refused(endpoint: ReplicaStorage, tmp_path: Path) -> None:
    bucket = _client().bucket("bucket")
    with pytest.raises(exceptions.BadRequest, match="plain relative path"):
        bucket.blob("a/../../escape.txt").upload_from_string(b"no")
    assert not (tmp_path / "storage" / "escape.txt").exists()
    with pytest.raises(exceptions.Conflict, match="folder and an object"):
        bucket.blob("data").upload_from_string(b"data is a folder here")
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("data/a.csv").upload_from_string(b"replaced?", if_generation_match=0)
    assert (tmp_path / "storage" / "bucket" / "data" / "a.csv").read_text() == "x,y\n1,2\n"


def test_names_too_long_for_cloud_storage_or_a_file_are_a_400(endpoint: ReplicaStorage) -> None:
    bucket = _client().bucket("bucket")
    with pytest.raises(exceptions.BadRequest, match="maximum object length is 1024 bytes"):
        bucket.blob("d/" * 520).upload_from_string(b"no")
    with pytest.raises(exceptions.BadRequest, match="a file name has at most 255 bytes"):
        bucket.blob("x/" + "a" * 300 + "/f").upload_from_string(b"no")
    with pytest.raises(exceptions.BadRequest, match="a file name has at most 255 bytes"):
        bucket.blob("x/" + "a" * 300).download_as_bytes()
    # The endpoint is still serving.
    bucket.blob("short/ok.txt").upload_from_string(b"ok")
    assert bucket.blob("short/ok.txt").download_as_bytes() == b"ok"


def _through_proxy(endpoint: ReplicaStorage, host: str) -> http.client.HTTPSConnection:
    proxy = urllib.parse.urlsplit(endpoint.endpoint)
    context = ssl.create_default_context(cafile=str(endpoint.ca_path))
    connection = http.client.HTTPSConnection(proxy.hostname or "", proxy.port, context=context, timeout=30)
    connection.set_tunnel(host, 443)
    return connection


def test_googles_storage_hosts_are_answered_through_the_proxy_with_the_installations_ca(
    endpoint: ReplicaStorage,
) -> None:
    # TensorFlow's reads: storage.googleapis.com/BUCKET/OBJECT with a Range.
    reads = _through_proxy(endpoint, "storage.googleapis.com")
    reads.request("GET", "/bucket/data%2Fa.csv", headers={"Range": "bytes=4-6"})
    answer = reads.getresponse()
    assert (answer.status, answer.read(), answer.getheader("Content-Range")) == (206, b"1,2", "bytes 4-6/8")
    reads.request("GET", "/bucket/data%2Fa.csv", headers={"Range": "bytes=8-20"})
    past_the_end = reads.getresponse()
    assert past_the_end.status == 416 and past_the_end.read() == b""
    # Its metadata and uploads: www.googleapis.com/storage/v1/..., resumable with a session URL
    # that points back at www.googleapis.com (so the upload goes through the proxy too).
    api = _through_proxy(endpoint, "www.googleapis.com")
    api.request("GET", "/storage/v1/b/bucket/o/data%2Fa.csv?fields=size%2Cgeneration%2Cupdated")
    meta = json.loads(api.getresponse().read())
    assert meta["size"] == "8" and int(meta["generation"]) > 0 and meta["updated"].endswith("Z")
    api.request("POST", "/upload/storage/v1/b/bucket/o?uploadType=resumable&name=up%2Fx.bin",
                headers={"X-Upload-Content-Length": "6"})
    started = api.getresponse()
    started.read()
    session = urllib.parse.urlsplit(started.getheader("Location") or "")
    assert session.scheme == "https" and session.hostname == "www.googleapis.com"
    api.request("PUT", f"{session.path}?{session.query}", body=b"abc", headers={"Content-Range": "bytes 0-2/6"})
    partial = api.getresponse()
    partial.read()
    assert (partial.status, partial.getheader("Range")) == (308, "bytes=0-2")
    api.request("PUT", f"{session.path}?{session.query}", body=b"def", headers={"Content-Range": "bytes 3-5/6"})
    done = api.getresponse()
    assert done.status == 200 and json.loads(done.read())["name"] == "up/x.bin"
    assert _client().bucket("bucket").blob("up/x.bin").download_as_bytes() == b"abcdef"


@pytest.mark.parametrize("host", ["oauth2.googleapis.com:443", "example.com:443", "www.googleapis.com:80"])
def test_every_other_host_is_refused(endpoint: ReplicaStorage, host: str) -> None:
    name, _, port = host.partition(":")
    connection = _through_proxy(endpoint, name)
    connection.set_tunnel(name, int(port))
    with pytest.raises(OSError, match="403"):
        connection.request("GET", "/")


def test_the_replicas_environment_keeps_the_cluster_off_the_proxy(endpoint: ReplicaStorage) -> None:
    env = endpoint.environment({"NO_PROXY": "corp.example"})
    assert env["HTTPS_PROXY"] == env["https_proxy"] == env["STORAGE_EMULATOR_HOST"] == endpoint.endpoint
    for variable in ("NO_PROXY", "no_proxy", "no_grpc_proxy"):
        assert env[variable].split(",") == ["localhost", "127.0.0.1", "::1", "corp.example"]
    assert Path(env["CURL_CA_BUNDLE"]).read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert env["GOOGLE_AUTH_TOKEN_FOR_TESTING"]
    # TensorFlow's reads come in blocks of 16 MB, unless the replica inherits a size of its own.
    assert env["GCS_READ_CACHE_BLOCK_SIZE_MB"] == "16"
    assert "GCS_READ_CACHE_BLOCK_SIZE_MB" not in endpoint.environment({"GCS_READ_CACHE_BLOCK_SIZE_MB": "64"})


def test_with_a_gcs_emulator_upstream_tensorflows_requests_reach_that_emulator(
    tmp_path: Path, fake_gcs_server: FakeGcsServer
) -> None:
    bucket = fake_gcs_server.make_bucket()
    name = bucket.removeprefix("gs://")
    fake_gcs_server.put_object(f"{bucket}/data/a.csv", b"x,y\n1,2\n")
    with ReplicaStorage(tmp_path, tmp_path / "storage", upstream=fake_gcs_server.endpoint) as served:
        env = served.environment({})
        assert env["STORAGE_EMULATOR_HOST"] == fake_gcs_server.endpoint  # GCS clients go there directly
        reads = _through_proxy(served, "storage.googleapis.com")
        reads.request("GET", f"/{name}/data%2Fa.csv", headers={"Range": "bytes=4-6"})
        answer = reads.getresponse()
        assert (answer.status, answer.read()) == (206, b"1,2")
        api = _through_proxy(served, "www.googleapis.com")
        api.request("POST", f"/upload/storage/v1/b/{name}/o?uploadType=resumable&name=out%2Fm.bin",
                    headers={"X-Upload-Content-Length": "4"})
        started = api.getresponse()
        started.read()
        session = urllib.parse.urlsplit(started.getheader("Location") or "")
        api.request("PUT", f"{session.path}?{session.query}", body=b"wxyz", headers={"Content-Range": "bytes 0-3/4"})
        finished = api.getresponse()
        assert (finished.status, json.loads(finished.read())["size"]) == (200, "4")
        api.request("GET", f"/storage/v1/b/{name}/o?prefix=out%2F&delimiter=%2F")
        listing = json.loads(api.getresponse().read())
        assert [item["name"] for item in listing["items"]] == ["out/m.bin"]
    assert fake_gcs_server.read_object(f"{bucket}/out/m.bin") == b"wxyz"
    assert not (tmp_path / "storage" / name).exists(), "nothing went to the local store"


def _request(endpoint: ReplicaStorage, method: str, path: str, body: bytes = b"",
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, object]]:
    parts = urllib.parse.urlsplit(endpoint.endpoint)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        connection.close()


def test_gsutils_multipart_upload_with_a_quoted_boundary_and_bare_newlines(
    endpoint: ReplicaStorage, tmp_path: Path
) -> None:
    boundary = "===============3697596330202525008=="
    body = (f"--{boundary}\nContent-Type: application/json\nMIME-Version: 1.0\n\n"
            '{"bucket": "bucket", "contentType": "text/plain", "name": "x/m.txt"}\n'
            f"--{boundary}\nContent-Type: text/plain\nMIME-Version: 1.0\nContent-Transfer-Encoding: binary\n\n"
            f"hi\n\n--{boundary}--\n").encode()
    status, answer = _request(endpoint, "POST", "/upload/storage/v1/b/bucket/o?uploadType=multipart", body,
                              {"Content-Type": f"multipart/related; boundary='{boundary}'"})
    assert (status, answer.get("name")) == (200, "x/m.txt"), answer
    assert (tmp_path / "storage" / "bucket" / "x" / "m.txt").read_bytes() == b"hi\n"


def test_hashes_are_given_to_the_clients_that_ask_for_them(endpoint: ReplicaStorage) -> None:
    expected_md5 = base64.b64encode(hashlib.md5(b"x,y\n1,2\n").digest()).decode()
    _status, whole = _request(endpoint, "GET", "/storage/v1/b/bucket/o/data%2Fa.csv")
    assert whole["md5Hash"] == expected_md5 and whole["crc32c"]
    _status, named = _request(endpoint, "GET", "/storage/v1/b/bucket/o/data%2Fa.csv?fields=md5Hash,size")
    assert named["md5Hash"] == expected_md5
    # TensorFlow's stat and a plain listing do not make the endpoint read the object.
    _status, stat = _request(endpoint, "GET", "/storage/v1/b/bucket/o/data%2Fa.csv?fields=size,generation,updated")
    assert "md5Hash" not in stat
    _status, plain = _request(endpoint, "GET", "/storage/v1/b/bucket/o?prefix=data/")
    assert "md5Hash" not in plain["items"][0]  # type: ignore[index]
    _status, hashed = _request(endpoint, "GET", "/storage/v1/b/bucket/o?prefix=data/&fields=items/md5Hash,items/name")
    assert hashed["items"][0]["md5Hash"] == expected_md5  # type: ignore[index]


# -- the data path: the same bytes whichever way they travel ------------------------------------

# More than the endpoint's 1 MiB blocks and not a multiple of them: ranges cross block edges.
BIG = 3 * 1024 * 1024 + 12345


@pytest.fixture
def big_object(endpoint: ReplicaStorage, tmp_path: Path) -> bytes:
    data = os.urandom(BIG)
    (tmp_path / "storage" / "bucket" / "data" / "big.bin").write_bytes(data)
    return data


def _get(connection: http.client.HTTPConnection, path: str, headers: dict[str, str]
         ) -> tuple[int, bytes, dict[str, str]]:
    connection.request("GET", path, headers=headers)
    answer = connection.getresponse()
    return answer.status, answer.read(), {key.lower(): value for key, value in answer.getheaders()}


@pytest.mark.parametrize(("wanted", "first", "end"), [
    ("bytes=0-", 0, BIG),
    ("bytes=1048570-2097160", 1048570, 2097161),  # across two block edges
    ("bytes=-5000", BIG - 5000, BIG),
    ("bytes=3145720-99999999", 3145720, BIG),  # past the end: up to the end
])
def test_ranges_are_exact_over_plain_http_with_sendfile_and_through_the_tls_proxy(
    endpoint: ReplicaStorage, big_object: bytes, wanted: str, first: int, end: int
) -> None:
    parts = urllib.parse.urlsplit(endpoint.endpoint)
    plain = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    tls = _through_proxy(endpoint, "storage.googleapis.com")
    for connection, path in ((plain, "/download/storage/v1/b/bucket/o/data%2Fbig.bin?alt=media"),
                             (tls, "/bucket/data%2Fbig.bin")):
        for _twice in range(2):  # the connection stays usable after a body
            status, body, headers = _get(connection, path, {"Range": wanted})
            assert body == big_object[first:end], (path, len(body))
            assert headers["content-length"] == str(end - first)
            if (first, end) == (0, BIG):
                assert status == 200
            else:
                assert (status, headers["content-range"]) == (206, f"bytes {first}-{end - 1}/{BIG}")
    whole = _get(tls, "/bucket/data%2Fbig.bin", {})
    assert whole[0] == 200 and whole[1] == big_object


def _start_session(api: http.client.HTTPSConnection, name: str, total: int) -> str:
    api.request("POST", f"/upload/storage/v1/b/bucket/o?uploadType=resumable&name={urllib.parse.quote(name, safe='')}",
                headers={"X-Upload-Content-Length": str(total)})
    started = api.getresponse()
    started.read()
    session = urllib.parse.urlsplit(started.getheader("Location") or "")
    return f"{session.path}?{session.query}"


def _put(api: http.client.HTTPSConnection, session: str, body: bytes, content_range: str
         ) -> tuple[int, str | None, dict[str, Any]]:
    api.request("PUT", session, body=body, headers={"Content-Range": content_range})
    answer = api.getresponse()
    raw = answer.read()
    return answer.status, answer.getheader("Range"), json.loads(raw) if answer.status == 200 else {}


def _hashes(data: bytes) -> tuple[str, str]:
    crc = google_crc32c.Checksum(data).digest()
    return base64.b64encode(hashlib.md5(data).digest()).decode(), base64.b64encode(crc).decode()


def test_a_resumable_upload_cut_off_midway_resumes_from_the_bytes_that_arrived(
    endpoint: ReplicaStorage, tmp_path: Path
) -> None:
    data = os.urandom(2 * 1024 * 1024 + 999)
    total, first_chunk, cut_at = len(data), 1024 * 1024, 1024 * 1024 + 300 * 1024
    api = _through_proxy(endpoint, "www.googleapis.com")
    session = _start_session(api, "up/resumed.bin", total)
    assert _put(api, session, data[:first_chunk], f"bytes 0-{first_chunk - 1}/{total}")[:2] == (
        308, f"bytes=0-{first_chunk - 1}")

    # The second chunk announces the rest of the object, but its connection dies partway through.
    cut = _through_proxy(endpoint, "www.googleapis.com")
    cut.putrequest("PUT", session)
    cut.putheader("Content-Range", f"bytes {first_chunk}-{total - 1}/{total}")
    cut.putheader("Content-Length", str(total - first_chunk))
    cut.endheaders()
    cut.send(data[first_chunk:cut_at])
    cut.close()

    # The status query tells exactly what arrived (once the endpoint has read up to the cut).
    deadline = time.monotonic() + 20
    while (status := _put(api, session, b"", f"bytes */{total}"))[1] != f"bytes=0-{cut_at - 1}":
        assert status[0] == 308 and time.monotonic() < deadline, status
    # A chunk starting past what arrived is not written; the answer says where to resume.
    assert _put(api, session, data[cut_at + 10:], f"bytes {cut_at + 10}-{total - 1}/{total}")[:2] == (
        308, f"bytes=0-{cut_at - 1}")
    # The client resends from a little earlier than needed: the overlap is not written twice.
    resent_from = cut_at - 4096
    done_status, _range, resource = _put(api, session, data[resent_from:], f"bytes {resent_from}-{total - 1}/{total}")
    assert done_status == 200 and resource["size"] == str(total)
    assert (tmp_path / "storage" / "bucket" / "up" / "resumed.bin").read_bytes() == data
    assert (resource["md5Hash"], resource["crc32c"]) == _hashes(data)
    assert not list((tmp_path / "storage").glob(".aiptrain-uploads/*")), "no upload left behind"


def test_chunked_and_whole_uploads_keep_their_bytes_and_hashes(endpoint: ReplicaStorage, tmp_path: Path) -> None:
    data = os.urandom(BIG)
    parts = urllib.parse.urlsplit(endpoint.endpoint)
    plain = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    pieces = (data[i:i + 700_001] for i in range(0, len(data), 700_001))
    plain.request("POST", "/upload/storage/v1/b/bucket/o?uploadType=media&name=up%2Fchunked.bin", body=pieces,
                  headers={"Content-Type": "application/octet-stream"}, encode_chunked=True)
    answer = plain.getresponse()
    resource = json.loads(answer.read())
    assert answer.status == 200 and (resource["md5Hash"], resource["crc32c"]) == _hashes(data)
    assert (tmp_path / "storage" / "bucket" / "up" / "chunked.bin").read_bytes() == data
    # One PUT with the whole object through the proxy, as TensorFlow uploads, then read back whole.
    api = _through_proxy(endpoint, "www.googleapis.com")
    status, _range, whole = _put(api, _start_session(api, "up/whole.bin", len(data)), data,
                                 f"bytes 0-{len(data) - 1}/{len(data)}")
    assert status == 200 and whole["crc32c"] == _hashes(data)[1]
    assert _get(_through_proxy(endpoint, "storage.googleapis.com"), "/bucket/up%2Fwhole.bin", {})[1] == data


def test_tensorflows_uploads_leave_the_md5_to_whoever_asks_for_it(endpoint: ReplicaStorage) -> None:
    data = os.urandom(300_000)
    md5, crc32c = _hashes(data)
    upload = "/upload/storage/v1/b/bucket/o?uploadType=media&name=tf%2Fout.bin"
    for agent in ("TSL", "TensorFlow/1.15.5"):  # TensorFlow 2.x's and 1.15's libcurl
        status, answer = _request(endpoint, "POST", upload, data, {"User-Agent": agent})
        assert status == 200 and answer["crc32c"] == crc32c and "md5Hash" not in answer, answer
        _status, meta = _request(endpoint, "GET", "/storage/v1/b/bucket/o/tf%2Fout.bin")
        assert (meta["md5Hash"], meta["crc32c"]) == (md5, crc32c)  # computed from the file when asked
    # Every other client gets both in the upload's answer (gcloud and gsutil compare the MD5).
    _status, answer = _request(endpoint, "POST", upload, data, {"User-Agent": "gcloud-python/3.1 gsutil/5.30"})
    assert (answer["md5Hash"], answer["crc32c"]) == (md5, crc32c)


@pytest.fixture
def trusted_endpoint(endpoint: ReplicaStorage, tmp_path: Path) -> Iterator[ReplicaStorage]:
    """An endpoint for a runtime whose TensorFlow ignores CURL_CA_BUNDLE (the others never get the view)."""
    assert TRUST_VARIABLE not in endpoint.environment(os.environ)
    with ReplicaStorage(tmp_path, tmp_path / "storage", extend_system_trust=True) as served:
        yield served


def test_a_replica_trusts_the_proxy_through_the_systems_ca_bundle(trusted_endpoint: ReplicaStorage) -> None:
    """What TensorFlow 1.15 and 2.1 need: their libcurl checks the system's bundle, not CURL_CA_BUNDLE."""
    endpoint = trusted_endpoint
    if endpoint.system_trust_problem:
        pytest.skip(f"this machine gives no process a view of its own: {endpoint.system_trust_problem}")
    curl = shutil.which("curl")
    assert curl, "curl (built against the system's CA bundle) is on every machine of this project"
    env = endpoint.environment(os.environ) | {"PATH": os.environ.get("PATH", "")}
    for variable in ("CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE"):
        env.pop(variable, None)
    argv = [curl, "-sS", "--proxy", endpoint.endpoint, "https://storage.googleapis.com/bucket/data%2Fa.csv"]

    def run(environment: dict[str, str]) -> tuple[int, bytes, bytes]:
        process = start_process(argv, env=environment, cwd=Path.cwd())
        out, err = process.popen.communicate(timeout=60)
        return process.popen.returncode, out, err

    assert run(env) == (0, b"x,y\n1,2\n", b"")
    # A program started with a replica's environment but not by the launcher (tuning's summary reader).
    direct = subprocess.run(trusting(argv, env), env=env, capture_output=True, timeout=60, check=False)
    assert (direct.returncode, direct.stdout) == (0, b"x,y\n1,2\n"), direct.stderr
    untrusting = {key: value for key, value in env.items() if key != TRUST_VARIABLE}
    code, _out, err = run(untrusting)
    assert code == 60 and b"certificate" in err  # the control: the system's own bundle does not know the CA
    assert endpoint.system_bundle is not None
    assert b"".join(Path(p).read_bytes() for p in system_bundles()).count(endpoint.ca_path.read_bytes()) == 0, \
        "the machine's own bundle is untouched"
