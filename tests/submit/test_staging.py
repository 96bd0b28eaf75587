"""Content-addressed staging against the local object store (a real store, on disk)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aiptrain._storage import base
from aiptrain._storage import local as local_store
from aiptrain._storage.base import LocalDigests, ObjectInfo, ProgressCallback
from aiptrain._storage.local import LocalObjectStore
from aiptrain._submit import staging
from aiptrain._submit.staging import (
    UploadPlan,
    UploadResult,
    check_package_entries,
    classify_packages,
    describe_result,
    execute_uploads,
    human_size,
    plan_uploads,
    staging_uri,
)
from aiptrain.errors import OperationalError, ValidationFailed


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "storage")


@pytest.fixture
def packages(tmp_path: Path) -> list[Path]:
    first = tmp_path / "dist/trainer-0.1.tar.gz"
    second = tmp_path / "deps/helper-2.0-py3-none-any.whl"
    for path, content in ((first, b"trainer " * 1000), (second, b"helper " * 300)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return [first, second]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("gs://stage", "gs://stage/aiptrain/packages/{sha}/pkg.tar.gz"),
        ("gs://stage/", "gs://stage/aiptrain/packages/{sha}/pkg.tar.gz"),
        ("stage", "gs://stage/aiptrain/packages/{sha}/pkg.tar.gz"),
        ("gs://stage/team/a/", "gs://stage/team/a/aiptrain/packages/{sha}/pkg.tar.gz"),
    ],
)
def test_staging_uri_is_content_addressed(location: str, expected: str) -> None:
    digest = "ab" * 32
    assert staging_uri(location, digest, "pkg.tar.gz") == expected.format(sha=digest)


def test_plan_without_checking_has_no_side_effects(
    store: LocalObjectStore, packages: list[Path]
) -> None:
    plans = plan_uploads(packages, "gs://stage", store, check_existing=False)
    assert [p.status for p in plans] == ["unknown", "unknown"]
    assert [p.uri for p in plans] == [
        f"gs://stage/aiptrain/packages/{sha(packages[0])}/trainer-0.1.tar.gz",
        f"gs://stage/aiptrain/packages/{sha(packages[1])}/helper-2.0-py3-none-any.whl",
    ]
    assert [(p.sha256, p.size) for p in plans] == [(sha(f), f.stat().st_size) for f in packages]
    assert not store.root.exists()


def test_plan_with_no_store_is_unknown(packages: list[Path]) -> None:
    assert {p.status for p in plan_uploads(packages, "gs://stage", None, check_existing=True)} == {"unknown"}


def test_first_run_uploads_second_run_reuses(store: LocalObjectStore, packages: list[Path]) -> None:
    first = plan_uploads(packages, "gs://stage", store, check_existing=True)
    assert [p.status for p in first] == ["upload", "upload"]
    results = execute_uploads(first, store)
    assert [r.action for r in results] == ["uploaded", "uploaded"]
    assert [r.bytes_sent for r in results] == [f.stat().st_size for f in packages]
    for plan, local in zip(first, packages, strict=True):
        assert store.path_for(plan.uri).read_bytes() == local.read_bytes()
    mtimes = [store.path_for(p.uri).stat().st_mtime_ns for p in first]

    second = plan_uploads(packages, "gs://stage", store, check_existing=True)
    assert [p.status for p in second] == ["reuse", "reuse"]
    again = execute_uploads(second, store)
    assert [(r.action, r.bytes_sent) for r in again] == [("reused", 0), ("reused", 0)]
    assert [store.path_for(p.uri).stat().st_mtime_ns for p in second] == mtimes


def test_changed_file_goes_to_a_new_object(store: LocalObjectStore, packages: list[Path]) -> None:
    execute_uploads(plan_uploads(packages[:1], "gs://stage", store, check_existing=True), store)
    old_uri = staging_uri("gs://stage", sha(packages[0]), packages[0].name)
    packages[0].write_bytes(b"new trainer code")
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    assert plan.status == "upload"
    assert plan.uri != old_uri
    [result] = execute_uploads([plan], store)
    assert result.action == "uploaded"
    assert store.path_for(old_uri).is_file()  # shared across jobs: never deleted
    assert store.path_for(plan.uri).read_bytes() == b"new trainer code"


def test_object_present_with_other_bytes_is_replaced(store: LocalObjectStore, packages: list[Path]) -> None:
    uri = staging_uri("gs://stage", sha(packages[0]), packages[0].name)
    partial = store.path_for(uri)
    partial.parent.mkdir(parents=True)
    partial.write_bytes(packages[0].read_bytes()[:100])  # an interrupted copy by another tool
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    assert plan.status == "upload"
    assert "other content" in plan.reason
    [result] = execute_uploads([plan], store)
    assert result.action == "uploaded"
    assert partial.read_bytes() == packages[0].read_bytes()


def test_unknown_plan_checks_before_uploading(store: LocalObjectStore, packages: list[Path]) -> None:
    execute_uploads(plan_uploads(packages, "gs://stage", store, check_existing=True), store)
    unchecked = plan_uploads(packages, "gs://stage", store, check_existing=False)
    assert [r.action for r in execute_uploads(unchecked, store)] == ["reused", "reused"]


def test_progress_factory_is_called_per_upload(store: LocalObjectStore, packages: list[Path]) -> None:
    calls: dict[str, list[tuple[int, int]]] = {}

    def factory(plan: UploadPlan):
        events = calls.setdefault(plan.local.name, [])
        return lambda sent, total: events.append((sent, total))

    execute_uploads(plan_uploads(packages, "gs://stage", store, check_existing=True), store,
                    progress_factory=factory)
    assert set(calls) == {p.name for p in packages}
    for local in packages:
        assert calls[local.name][-1] == (local.stat().st_size, local.stat().st_size)


def test_file_changed_between_plan_and_upload_is_refused(store: LocalObjectStore, packages: list[Path]) -> None:
    plans = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    packages[0].write_bytes(b"edited after planning")
    with pytest.raises(OperationalError, match="changed while it was being staged"):
        execute_uploads(plans, store)
    assert not store.path_for(plans[0].uri).exists()


class RecordingStore(LocalObjectStore):
    """The local store, remembering the digests each upload was handed."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.handed: list[LocalDigests | None] = []

    def upload(
        self,
        local: Path,
        uri: str,
        *,
        progress: ProgressCallback | None = None,
        digests: LocalDigests | None = None,
    ) -> ObjectInfo:
        self.handed.append(digests)
        return super().upload(local, uri, progress=progress, digests=digests)


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file `digest_file` reads, from staging and from the local store."""
    paths: list[Path] = []
    real = base.digest_file

    def counting(path: Path) -> LocalDigests:
        paths.append(path)
        return real(path)

    monkeypatch.setattr(staging, "digest_file", counting)
    monkeypatch.setattr(local_store, "digest_file", counting)
    return paths


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled however recently they were written (tests cannot wait seconds)."""
    monkeypatch.setattr(base, "_RACY_WINDOW_NS", -1)


@pytest.mark.usefixtures("settled")
def test_an_unchanged_file_is_hashed_once_and_its_digests_reach_the_store(
    tmp_path: Path, packages: list[Path], hashed: list[Path]
) -> None:
    store = RecordingStore(tmp_path / "storage")
    plans = plan_uploads(packages, "gs://stage", store, check_existing=True)
    results = execute_uploads(plans, store)
    assert [r.action for r in results] == ["uploaded", "uploaded"]
    assert hashed == packages  # at planning only
    assert len(store.handed) == 2
    for handed, plan in zip(store.handed, plans, strict=True):
        assert handed is plan.digests
    for plan, source in zip(plans, packages, strict=True):
        assert store.path_for(plan.uri).read_bytes() == source.read_bytes()


@pytest.mark.usefixtures("settled")
def test_a_file_rewritten_with_other_bytes_of_the_same_size_is_refused(
    store: LocalObjectStore, packages: list[Path], hashed: list[Path]
) -> None:
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    assert plan.digests is not None and plan.digests.state is not None
    content = packages[0].read_bytes()
    packages[0].write_bytes(content[::-1])  # same size; only the change time tells
    with pytest.raises(OperationalError, match="changed while it was being staged"):
        execute_uploads([plan], store)
    assert hashed == [packages[0], packages[0]]  # its state no longer vouched: hashed again
    assert not store.path_for(plan.uri).exists()


@pytest.mark.usefixtures("settled")
def test_a_file_rewritten_with_the_same_bytes_is_hashed_again_and_staged(
    store: LocalObjectStore, packages: list[Path], hashed: list[Path]
) -> None:
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    packages[0].write_bytes(packages[0].read_bytes())
    [result] = execute_uploads([plan], store)
    assert result.action == "uploaded"
    assert hashed == [packages[0], packages[0]]


def test_a_file_written_just_before_planning_is_hashed_again(
    store: LocalObjectStore, packages: list[Path], hashed: list[Path]
) -> None:
    """Within the racy window a write may leave every stat field as it was: trust no state."""
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    assert plan.digests is not None and plan.digests.state is None
    [result] = execute_uploads([plan], store)
    assert result.action == "uploaded"
    assert hashed == [packages[0], packages[0]]


@pytest.mark.usefixtures("settled")
def test_a_file_deleted_after_planning_is_an_operational_error(
    store: LocalObjectStore, packages: list[Path]
) -> None:
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    packages[0].unlink()
    with pytest.raises(OperationalError, match="cannot read"):
        execute_uploads([plan], store)


@pytest.mark.usefixtures("settled")
def test_a_file_changed_during_the_copy_is_refused(
    store: LocalObjectStore, packages: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state vouched for the file just before the copy; the copy itself sees other bytes."""
    [plan] = plan_uploads(packages[:1], "gs://stage", store, check_existing=True)
    real_copy = local_store._atomic_copy

    def copy_after_an_edit(source: Path, *args: object, **kwargs: object) -> None:
        source.write_bytes(b"edited while copying")
        real_copy(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(local_store, "_atomic_copy", copy_after_an_edit)
    with pytest.raises(OperationalError, match="changed while it was being staged"):
        execute_uploads([plan], store)
    # What was written is described truthfully, so a later plan of these bytes replaces it.
    written = store.stat(plan.uri)
    assert written is not None and plan.digests is not None
    assert written.sha256 == hashlib.sha256(b"edited while copying").hexdigest()
    assert not written.matches(plan.digests)


def test_describe_result_lines() -> None:
    reused = UploadResult(Path("a"), "gs://b/x/a", "0" * 64, 10, "reused", 0, 0.0)
    uploaded = UploadResult(Path("a"), "gs://b/x/a", "0" * 64, 1_234_567, "uploaded", 1_234_567, 0.31)
    assert describe_result(reused) == "reused gs://b/x/a"
    assert describe_result(uploaded) == "uploaded 1.2 MB in 0.3 s → gs://b/x/a"


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1_500_000, "1.5 MB"), (3_200_000_000, "3.2 GB")],
)
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


# -- --packages --------------------------------------------------------------------------------


def test_classify_packages_splits_remote_and_local(packages: list[Path]) -> None:
    entries = ["gs://deps/lib-1.0.tar.gz", str(packages[0]), "", str(packages[1]), "gs://other/x.whl"]
    remote, local = classify_packages(entries)
    assert remote == ["gs://deps/lib-1.0.tar.gz", "gs://other/x.whl"]
    assert local == packages


def test_classify_packages_names_every_bad_entry(tmp_path: Path, packages: list[Path]) -> None:
    same_name = tmp_path / "other/trainer-0.1.tar.gz"
    same_name.parent.mkdir()
    same_name.write_bytes(b"x")
    entries = [
        str(tmp_path / "missing.tar.gz"),
        str(tmp_path),
        "gs://",
        "gs://bucket/folder/",
        str(packages[0]),
        str(same_name),
    ]
    with pytest.raises(ValidationFailed) as caught:
        classify_packages(entries)
    assert caught.value.exit_code == 2
    rendered = str(caught.value)
    assert f"{tmp_path / 'missing.tar.gz'} does not exist" in rendered
    assert f"{tmp_path} is not a file" in rendered
    assert "names no bucket" in rendered
    assert "names a folder" in rendered
    assert "same file name: trainer-0.1.tar.gz" in rendered
    assert len(caught.value.problems) == 5
    assert check_package_entries(entries) == caught.value.problems
