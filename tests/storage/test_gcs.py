"""GcsObjectStore and staging against a real fake-gcs-server, with and without a faulty network."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import threading
from pathlib import Path

import pytest

from aiptrain._packaging import build_package
from aiptrain._storage import base as storage_base
from aiptrain._storage import gcs
from aiptrain._storage.base import LocalDigests, ObjectStore, digest_file
from aiptrain._storage.gcs import GcsObjectStore
from aiptrain._submit import staging
from aiptrain._submit.staging import execute_uploads, plan_uploads
from aiptrain.errors import NotFound, OperationalError, PermissionDenied
from tests.fixtures.gcs import FakeGcsServer, FaultyProxy

PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "projects"
MiB = 1024 * 1024


def fast_store(**overrides: object) -> GcsObjectStore:
    """A store whose retries back off in milliseconds, so fault tests stay quick."""
    options: dict[str, object] = {"retry_initial_delay": 0.01, "retry_max_delay": 0.1, "retry_timeout": 30.0}
    options.update(overrides)
    return GcsObjectStore(**options)  # type: ignore[arg-type]


def random_file(path: Path, size: int) -> Path:
    path.write_bytes(os.urandom(size))
    return path


@pytest.fixture
def through_proxy(fake_gcs: FakeGcsServer, faulty_proxy: FaultyProxy, monkeypatch: pytest.MonkeyPatch) -> FaultyProxy:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", faulty_proxy.endpoint)
    return faulty_proxy


def assert_intact(fake_gcs: FakeGcsServer, uri: str, local: Path) -> None:
    assert fake_gcs.read_object(uri) == local.read_bytes()
    resource = fake_gcs.object_resource(uri)
    assert resource is not None
    assert resource["metadata"] == {"sha256": digest_file(local).sha256}
    assert resource["crc32c"] == digest_file(local).crc32c


# -- staging end to end ------------------------------------------------------------------------


def test_first_run_uploads_second_reuses_changed_source_uploads_anew(
    fake_gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = fake_gcs.make_bucket()
    shutil.copytree(PROJECTS / "no_setup", tmp_path / "project")
    package_dir = tmp_path / "project/trainer"
    cache = tmp_path / "cache"
    store = GcsObjectStore()

    built = build_package(package_dir, cache_dir=cache)
    [plan] = plan_uploads([built.path], bucket, store, check_existing=True)
    assert plan.status == "upload"
    assert plan.uri == f"{bucket}/aiptrain/packages/{built.sha256}/{built.path.name}"
    [result] = execute_uploads([plan], store)
    assert (result.action, result.bytes_sent) == ("uploaded", built.size)
    assert_intact(fake_gcs, plan.uri, built.path)
    generation = fake_gcs.object_resource(plan.uri)["generation"]  # type: ignore[index]

    # Same sources: the build comes from the cache and nothing is uploaded.
    again = build_package(package_dir, cache_dir=cache)
    assert again.reused_from_cache is True
    [plan2] = plan_uploads([again.path], bucket, GcsObjectStore(), check_existing=True)
    assert (plan2.status, plan2.uri) == ("reuse", plan.uri)
    [result2] = execute_uploads([plan2], GcsObjectStore())
    assert (result2.action, result2.bytes_sent) == ("reused", 0)
    assert fake_gcs.object_resource(plan.uri)["generation"] == generation  # type: ignore[index]

    # A changed source is a new object next to the old one.
    (package_dir / "task.py").write_text("print('version two')\n")
    changed = build_package(package_dir, cache_dir=cache)
    [plan3] = plan_uploads([changed.path], bucket, store, check_existing=True)
    assert plan3.status == "upload"
    [result3] = execute_uploads([plan3], store)
    assert result3.action == "uploaded"
    assert_intact(fake_gcs, plan3.uri, changed.path)
    bucket_name = bucket.removeprefix("gs://")
    assert len(fake_gcs.list_objects(bucket_name, "aiptrain/packages/")) == 2


def test_unchecked_plan_touches_nothing_and_reuses_on_execution(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "dep-1.0.tar.gz", 4000)
    store = GcsObjectStore()
    [dry] = plan_uploads([local], bucket, store, check_existing=False)
    assert dry.status == "unknown"
    assert fake_gcs.list_objects(bucket.removeprefix("gs://")) == []
    execute_uploads(plan_uploads([local], bucket, store, check_existing=True), store)
    [result] = execute_uploads(plan_uploads([local], bucket, store, check_existing=False), store)
    assert result.action == "reused"


def test_object_with_other_bytes_is_replaced(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "trainer-1.0.tar.gz", 50_000)
    store = GcsObjectStore()
    [plan] = plan_uploads([local], bucket, store, check_existing=False)
    fake_gcs.put_object(plan.uri, local.read_bytes()[:1000])  # a truncated object, no sha256
    [plan] = plan_uploads([local], bucket, store, check_existing=True)
    assert plan.status == "upload"
    [result] = execute_uploads([plan], store)
    assert result.action == "uploaded"
    assert_intact(fake_gcs, plan.uri, local)


# -- the store ---------------------------------------------------------------------------------


def test_satisfies_the_object_store_protocol() -> None:
    typed: ObjectStore = GcsObjectStore()
    assert typed.kind == "gcs"


def test_stat_reports_what_upload_recorded(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "pkg.tar.gz", 12345)
    store = GcsObjectStore()
    uri = f"{bucket}/x/pkg.tar.gz"
    assert store.stat(uri) is None
    store.upload(local, uri)
    info = store.stat(uri)
    digests = digest_file(local)
    assert info is not None
    assert (info.size, info.sha256, info.crc32c) == (digests.size, digests.sha256, digests.crc32c)
    # GCS reports an md5 too; with crc32c at hand the local side does not compute one.
    assert info.md5 == base64.b64encode(hashlib.md5(local.read_bytes()).digest()).decode()
    assert digests.md5 is None
    assert info.generation is not None
    assert fake_gcs.object_resource(uri)["contentType"] == "application/gzip"  # type: ignore[index]


def test_second_upload_of_the_same_object_is_already_present(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    # The create-only precondition fails (412); the checksums show it is the same content.
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "pkg.tar.gz", 30_000)
    uri = f"{bucket}/pkg.tar.gz"
    first = GcsObjectStore().upload(local, uri)
    second = GcsObjectStore().upload(local, uri)
    assert first.already_present is False
    assert second.already_present is True
    assert second.generation == first.generation


def test_emulator_needs_no_google_credentials(
    fake_gcs: FakeGcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Any Application Default Credentials lookup would fail on this file.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "a.bin", 10)
    GcsObjectStore(project="some-project").upload(local, f"{bucket}/a.bin")
    assert fake_gcs.read_object(f"{bucket}/a.bin") == local.read_bytes()


def test_download_roundtrip_and_missing_object(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "a.bin", 70_000)
    store = GcsObjectStore()
    store.upload(local, f"{bucket}/dir/a.bin")
    target = tmp_path / "out/a.bin"
    store.download(f"{bucket}/dir/a.bin", target)
    assert target.read_bytes() == local.read_bytes()
    with pytest.raises(NotFound, match=f"{bucket}/dir/missing.bin does not exist"):
        store.download(f"{bucket}/dir/missing.bin", tmp_path / "out/missing.bin")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.bin"]


def test_missing_bucket_is_not_found_naming_it(fake_gcs: FakeGcsServer, tmp_path: Path) -> None:
    local = random_file(tmp_path / "a.bin", 100)
    store = GcsObjectStore()
    with pytest.raises(NotFound) as caught:
        store.upload(local, "gs://no-such-bucket-here/a.bin")
    error = caught.value
    assert error.exit_code == 1
    assert error.message == "bucket gs://no-such-bucket-here does not exist"
    assert error.hint is not None and "gcloud storage buckets create gs://no-such-bucket-here" in error.hint
    assert store.stat("gs://no-such-bucket-here/a.bin") is None


def test_permission_denied_names_the_bucket(
    through_proxy: FaultyProxy, fake_gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "a.bin", 100)
    through_proxy.inject("403", times=100)
    with pytest.raises(PermissionDenied) as caught:
        fast_store().upload(local, f"{bucket}/a.bin")
    error = caught.value
    assert error.exit_code == 1
    assert error.message == f"permission denied on {bucket} while uploading {local} to {bucket}/a.bin: injected 403"
    assert "\n" not in error.message
    assert error.hint is not None and "roles/storage.objectAdmin" in error.hint


# -- a faulty network --------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["503", "429", "drop", "drop_after_forward", "corrupt"])
def test_small_upload_survives_a_faulty_network(
    through_proxy: FaultyProxy, fake_gcs: FakeGcsServer, tmp_path: Path, fault: str
) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "trainer-0.1.tar.gz", 200_000)
    uri = f"{bucket}/pkg/trainer-0.1.tar.gz"
    times = 1 if fault == "corrupt" else 2
    through_proxy.inject(fault, times=times, method="POST", path_contains="/upload/")
    info = fast_store().upload(local, uri)
    assert [e.action for e in through_proxy.injected()] == [fault] * times  # the faults did happen
    assert info.matches(digest_file(local))
    assert_intact(fake_gcs, uri, local)


@pytest.mark.parametrize("fault", ["503", "drop", "drop_after_forward", "corrupt"])
def test_resumable_upload_of_a_large_file_survives_a_faulty_network(
    through_proxy: FaultyProxy, fake_gcs: FakeGcsServer, tmp_path: Path, fault: str
) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "big.tar.gz", 9 * MiB + 1234)  # above the 8 MiB threshold
    uri = f"{bucket}/pkg/big.tar.gz"
    # Fail chunks in the middle of the session, after a few went through.
    through_proxy.inject(fault, times=1 if fault == "corrupt" else 2, method="PUT", skip=3)
    progress: list[tuple[int, int]] = []
    info = fast_store(chunk_size=1 * MiB).upload(local, uri, progress=lambda s, t: progress.append((s, t)))
    assert through_proxy.injected()
    puts = [e for e in through_proxy.events if e.method == "PUT"]
    assert all("uploadType=resumable" in e.path for e in puts)
    assert len(puts) >= 10  # one request per 1 MiB chunk
    assert info.matches(digest_file(local))
    assert_intact(fake_gcs, uri, local)
    size = local.stat().st_size
    assert progress[-1] == (size, size)
    assert len(progress) >= 10
    assert all(total == size for _, total in progress)


def test_large_file_with_default_chunking_uses_a_resumable_session(
    through_proxy: FaultyProxy, fake_gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "big.bin", 8 * MiB + 1)
    fast_store().upload(local, f"{bucket}/big.bin")
    uploads = [e.path for e in through_proxy.events if "/upload/" in e.path]
    assert any("uploadType=resumable" in p for p in uploads)
    assert not any("uploadType=multipart" in p for p in uploads)
    # Below the default chunk size the whole file goes in one request of the session.
    assert len([e for e in through_proxy.events if e.method == "PUT"]) == 1
    assert_intact(fake_gcs, f"{bucket}/big.bin", local)


@pytest.mark.parametrize("fault", ["503", "drop", "drop_after_forward", "corrupt"])
def test_single_chunk_resumable_upload_survives_a_faulty_network(
    through_proxy: FaultyProxy, fake_gcs: FakeGcsServer, tmp_path: Path, fault: str
) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "big.tar.gz", 9 * MiB + 1234)
    uri = f"{bucket}/pkg/big.tar.gz"
    through_proxy.inject(fault, times=1, method="PUT")  # the request carrying the whole file
    # After drop_after_forward the session is complete; fake-gcs-server then answers a retried
    # PUT by closing the connection (GCS would answer 200), so the retries run out and the
    # store finds the object in place.
    info = fast_store(retry_timeout=3.0).upload(local, uri)
    assert [e.action for e in through_proxy.injected()] == [fault]
    assert info.matches(digest_file(local))
    assert_intact(fake_gcs, uri, local)


def test_staging_hashes_an_unchanged_file_once(
    fake_gcs: FakeGcsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning hashes the file; execution and the store reuse those digests."""
    monkeypatch.setattr(storage_base, "_RACY_WINDOW_NS", -1)  # count a file just written as settled
    hashed: list[Path] = []

    def counting(path: Path) -> LocalDigests:
        hashed.append(path)
        return digest_file(path)

    monkeypatch.setattr(staging, "digest_file", counting)
    monkeypatch.setattr(gcs, "digest_file", counting)
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "big.tar.gz", 9 * MiB)
    store = GcsObjectStore()
    [result] = execute_uploads(plan_uploads([local], bucket, store, check_existing=True), store)
    assert result.action == "uploaded"
    assert hashed == [local]
    assert_intact(fake_gcs, result.uri, local)


def test_persistent_server_errors_end_in_an_operational_error(
    through_proxy: FaultyProxy, fake_gcs: FakeGcsServer, tmp_path: Path
) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "a.bin", 1000)
    through_proxy.inject("503", times=10_000, method="POST")
    with pytest.raises(OperationalError) as caught:
        fast_store(retry_timeout=0.5).upload(local, f"{bucket}/a.bin")
    error = caught.value
    assert type(error) is OperationalError
    assert error.message.startswith(f"Cloud Storage failed while uploading {local} to {bucket}/a.bin: gave up")
    assert error.message.endswith("HTTP 503: injected 503")
    assert "\n" not in error.message
    assert len(through_proxy.injected()) > 1  # it did retry


# -- concurrency -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [300_000, 9 * MiB], ids=["multipart", "resumable"])
def test_concurrent_uploads_of_one_object_both_succeed(fake_gcs: FakeGcsServer, tmp_path: Path, size: int) -> None:
    bucket = fake_gcs.make_bucket()
    local = random_file(tmp_path / "shared.tar.gz", size)
    uri = f"{bucket}/aiptrain/packages/x/shared.tar.gz"
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def upload() -> None:
        store = fast_store(chunk_size=1 * MiB)  # like two separate processes: separate clients
        barrier.wait()
        try:
            outcomes.append(store.upload(local, uri))
        except BaseException as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=upload) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    digests = digest_file(local)
    assert len(outcomes) == 2
    for outcome in outcomes:
        assert not isinstance(outcome, BaseException), outcome
        assert outcome.matches(digests)  # type: ignore[attr-defined]
    assert_intact(fake_gcs, uri, local)
