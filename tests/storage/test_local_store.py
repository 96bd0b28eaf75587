"""The local object store: gs:// ↔ $AIPTRAIN_HOME/storage mapping, atomic uploads, checksums."""

from __future__ import annotations

import base64
import hashlib
import threading
from pathlib import Path

import pytest

from aiptrain._storage import base, local
from aiptrain._storage.base import LocalDigests, ObjectInfo, ObjectStore, digest_file
from aiptrain._storage.local import LocalObjectStore, default_storage_root, local_path_for
from aiptrain.errors import NotFound, OperationalError, UsageError


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "storage")


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "pkg-1.0.tar.gz"
    path.write_bytes(b"package bytes " * 5000)
    return path


# -- local_path_for ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "relative"),
    [
        ("gs://bucket/a/b.txt", "bucket/a/b.txt"),
        ("gs://bucket", "bucket"),
        ("gs://bucket/", "bucket"),
        ("gs://my-bucket.example_1/jobs/run/", "my-bucket.example_1/jobs/run"),
        ("gs://bucket/with space/ü.txt", "bucket/with space/ü.txt"),
    ],
)
def test_local_path_for_maps_under_the_storage_root(tmp_path: Path, uri: str, relative: str) -> None:
    assert local_path_for(uri, tmp_path) == tmp_path / relative


@pytest.mark.parametrize(
    "uri",
    [
        "gs://bucket/../etc/passwd",
        "gs://bucket/a/../../x",
        "gs://bucket/./a",
        "gs://bucket//etc/passwd",
        "gs://bucket/a//b",
        "gs://bucket/a\0b",
        "gs://../x",
        "gs://.aiptrain-meta/x",
        "gs://Bucket/x",
        "gs://b/x",
        "/etc/passwd",
        "s3://bucket/x",
        "gs:///x",
    ],
)
def test_local_path_for_refuses_escapes_and_bad_names(tmp_path: Path, uri: str) -> None:
    with pytest.raises(UsageError) as caught:
        local_path_for(uri, tmp_path)
    assert caught.value.exit_code == 2


def test_local_path_for_results_stay_inside_the_root(tmp_path: Path) -> None:
    for uri in ["gs://bucket/a/b/c", "gs://bucket/..a/b..", "gs://bucket/...", "gs://bucket/a.b/.c"]:
        path = local_path_for(uri, tmp_path)
        assert path.resolve().is_relative_to(tmp_path.resolve())


def test_default_root_is_under_aiptrain_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_HOME", str(tmp_path / "home"))
    assert default_storage_root() == tmp_path / "home" / "storage"
    assert LocalObjectStore().root == tmp_path / "home" / "storage"


# -- the store ---------------------------------------------------------------------------------


def test_satisfies_the_object_store_protocol(store: LocalObjectStore) -> None:
    typed: ObjectStore = store
    assert typed.kind == "local"


def test_upload_then_stat_reports_size_and_checksums(store: LocalObjectStore, payload: Path) -> None:
    uri = "gs://bucket/packages/pkg-1.0.tar.gz"
    assert store.stat(uri) is None

    info = store.upload(payload, uri)

    digests = digest_file(payload)
    assert (store.root / "bucket/packages/pkg-1.0.tar.gz").read_bytes() == payload.read_bytes()
    assert info.already_present is False
    stat = store.stat(uri)
    assert stat is not None
    assert (stat.uri, stat.size, stat.sha256, stat.md5, stat.crc32c) == (
        uri, digests.size, digests.sha256, digests.md5, digests.crc32c,
    )
    assert stat.matches(digests)


def test_bucket_directories_hold_only_the_objects(store: LocalObjectStore, payload: Path) -> None:
    store.upload(payload, "gs://bucket/dir/pkg.tar.gz")
    # Trainers see the bucket directory: no sidecars or temporary files in it.
    assert sorted(p.name for p in (store.root / "bucket").rglob("*")) == ["dir", "pkg.tar.gz"]
    sidecar = store.root / ".aiptrain-meta/bucket/dir/pkg.tar.gz.json"
    assert digest_file(payload).sha256 in sidecar.read_text()


def test_stat_of_a_file_written_directly_computes_its_checksum(store: LocalObjectStore) -> None:
    # A trainer writing to its job dir leaves no sidecar.
    target = store.root / "bucket/out/model.bin"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"weights")
    stat = store.stat("gs://bucket/out/model.bin")
    assert stat is not None
    assert stat.sha256 == digest_file(target).sha256


def test_stale_sidecar_is_not_trusted(store: LocalObjectStore, payload: Path, tmp_path: Path) -> None:
    uri = "gs://bucket/pkg.tar.gz"
    store.upload(payload, uri)
    target = store.root / "bucket/pkg.tar.gz"
    target.write_bytes(b"overwritten by something else")  # same inode, new content
    stat = store.stat(uri)
    assert stat is not None
    assert stat.sha256 == digest_file(target).sha256
    assert not stat.matches(digest_file(payload))


def test_uploading_identical_content_reports_already_present(store: LocalObjectStore, payload: Path) -> None:
    uri = "gs://bucket/pkg.tar.gz"
    store.upload(payload, uri)
    inode = (store.root / "bucket/pkg.tar.gz").stat().st_ino
    again = store.upload(payload, uri)
    assert again.already_present is True
    assert (store.root / "bucket/pkg.tar.gz").stat().st_ino == inode  # not rewritten


def test_upload_replaces_different_content_atomically(
    store: LocalObjectStore, payload: Path, tmp_path: Path
) -> None:
    uri = "gs://bucket/pkg.tar.gz"
    target = store.root / "bucket/pkg.tar.gz"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"old partial object")
    bigger = tmp_path / "big.bin"
    bigger.write_bytes(b"x" * (3 * 1024 * 1024 + 17))
    seen_during_copy: list[bytes] = []
    progress: list[tuple[int, int]] = []

    def on_progress(sent: int, total: int) -> None:
        progress.append((sent, total))
        seen_during_copy.append(target.read_bytes())

    info = store.upload(bigger, uri, progress=on_progress)

    # While the copy ran, readers saw the old object whole, never a half-written new one.
    assert seen_during_copy
    assert set(seen_during_copy) == {b"old partial object"}
    assert target.read_bytes() == bigger.read_bytes()
    assert info.sha256 == digest_file(bigger).sha256
    assert progress[-1] == (bigger.stat().st_size, bigger.stat().st_size)
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)
    assert not [p for p in target.parent.iterdir() if p.name != "pkg.tar.gz"]


def test_concurrent_uploads_of_one_object_leave_it_intact(store: LocalObjectStore, tmp_path: Path) -> None:
    source = tmp_path / "same.bin"
    source.write_bytes(bytes(range(256)) * 8000)
    uri = "gs://bucket/shared/same.bin"
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def upload() -> None:
        try:
            barrier.wait()
            store.upload(source, uri)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=upload) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (store.root / "bucket/shared/same.bin").read_bytes() == source.read_bytes()
    stat = store.stat(uri)
    assert stat is not None and stat.matches(digest_file(source))


def test_known_digests_spare_hashing_the_source(
    store: LocalObjectStore, payload: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digests = digest_file(payload)
    hashed: list[Path] = []

    def counted_digest_file(path: Path) -> LocalDigests:
        hashed.append(path)
        return digest_file(path)

    monkeypatch.setattr(local, "digest_file", counted_digest_file)
    uri = "gs://bucket/pkg.tar.gz"
    info = store.upload(payload, uri, digests=digests)
    again = store.upload(payload, uri, digests=digests)
    assert hashed == []  # neither the copy nor the "already present" check hashed the file again
    assert info.matches(digests) and not info.already_present
    assert again.already_present


def test_what_was_copied_is_reported_not_what_the_caller_expected(
    store: LocalObjectStore, payload: Path, tmp_path: Path
) -> None:
    """Digests handed in that no longer fit the file do not end up describing the object."""
    stale = digest_file(payload)
    payload.write_bytes(b"edited after hashing")
    uri = "gs://bucket/pkg.tar.gz"
    info = store.upload(payload, uri, digests=stale)
    assert not info.matches(stale)
    stat = store.stat(uri)
    assert stat is not None and stat.matches(digest_file(payload))


def test_digests_use_crc32c_and_fall_back_to_md5_without_it(
    payload: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = payload.read_bytes()
    with_crc = digest_file(payload)
    assert with_crc.crc32c is not None and with_crc.md5 is None
    assert with_crc.sha256 == hashlib.sha256(content).hexdigest()
    monkeypatch.setattr(base, "_new_crc32c", lambda: None)  # google-crc32c not installed
    without_crc = digest_file(payload)
    assert without_crc.crc32c is None
    assert without_crc.md5 == base64.b64encode(hashlib.md5(content).digest()).decode()
    # An object known only by what GCS computes (no sha256 metadata) is still compared.
    foreign = ObjectInfo("gs://b/x", len(content), md5=without_crc.md5, crc32c=with_crc.crc32c)
    assert foreign.matches(with_crc) and foreign.matches(without_crc)
    other = ObjectInfo("gs://b/x", len(content), md5="AAAA", crc32c="AAAA")
    assert not other.matches(with_crc) and not other.matches(without_crc)


def test_upload_to_a_directory_name_is_refused(store: LocalObjectStore, payload: Path) -> None:
    with pytest.raises(UsageError, match="names a directory"):
        store.upload(payload, "gs://bucket/dir/")


def test_upload_where_a_file_blocks_the_path_is_an_operational_error(
    store: LocalObjectStore, payload: Path
) -> None:
    store.upload(payload, "gs://bucket/a")
    with pytest.raises(OperationalError) as caught:
        store.upload(payload, "gs://bucket/a/b")
    assert caught.value.exit_code == 1
    assert "gs://bucket/a/b" in caught.value.message


def test_download_copies_the_object(store: LocalObjectStore, payload: Path, tmp_path: Path) -> None:
    store.upload(payload, "gs://bucket/pkg.tar.gz")
    target = tmp_path / "downloads/nested/pkg.tar.gz"
    store.download("gs://bucket/pkg.tar.gz", target)
    assert target.read_bytes() == payload.read_bytes()


def test_download_of_a_missing_object_is_not_found(store: LocalObjectStore, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="gs://bucket/missing") as caught:
        store.download("gs://bucket/missing", tmp_path / "x")
    assert caught.value.exit_code == 1
    assert not (tmp_path / "x").exists()
