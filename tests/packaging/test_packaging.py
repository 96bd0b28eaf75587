"""Trainer packaging: real setuptools builds of the fixture projects in tests/fixtures/projects."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from aiptrain._packaging import (
    REPRODUCIBLE_MTIME,
    BuiltPackage,
    build_package,
    check_duplicate_basenames,
    check_package_path,
    collect_sources,
)
from aiptrain._packaging import cache as packaging_cache
from aiptrain._packaging import sources as packaging_sources
from aiptrain.errors import UsageError, ValidationFailed

PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "projects"


def project(tmp_path: Path, name: str, *, into: str = "work") -> Path:
    """A private copy of a fixture project; returns its `trainer` package directory."""
    target = tmp_path / into / name
    shutil.copytree(PROJECTS / name, target)
    return target / "trainer"


def snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mode, p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def members(package: BuiltPackage) -> list[tarfile.TarInfo]:
    with tarfile.open(package.path) as archive:
        return archive.getmembers()


# -- builds ------------------------------------------------------------------------------------


def test_builds_a_project_with_setup_py(tmp_path: Path) -> None:
    built = build_package(project(tmp_path, "with_setup_py"), cache_dir=tmp_path / "cache")
    assert (built.name, built.version) == ("fixture-with-setup", "1.2.3")
    # setuptools >= 69 writes PEP 625 names (underscores); older ones kept the dashes.
    assert built.path.name in {"fixture_with_setup-1.2.3.tar.gz", "fixture-with-setup-1.2.3.tar.gz"}
    assert built.generated_setup is False
    assert built.reused_from_cache is False
    assert built.sha256 == hashlib.sha256(built.path.read_bytes()).hexdigest()
    assert built.size == built.path.stat().st_size
    assert f"{built.path.name.removesuffix('.tar.gz')}/trainer/task.py" in built.files
    assert built.files == sorted(built.files)
    assert built.files == [m.name for m in members(built) if m.isfile()]


def test_builds_a_pyproject_only_project(tmp_path: Path) -> None:
    built = build_package(project(tmp_path, "with_pyproject"), cache_dir=tmp_path / "cache")
    assert (built.name, built.version) == ("fixture-with-pyproject", "2.0.0")
    assert built.path.name in {"fixture_with_pyproject-2.0.0.tar.gz", "fixture-with-pyproject-2.0.0.tar.gz"}
    assert f"{built.path.name.removesuffix('.tar.gz')}/trainer/task.py" in built.files
    assert built.generated_setup is False


def test_generated_setup_keeps_subpackages_and_data(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    built = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert built.generated_setup is True
    assert built.name == "trainer"
    assert re.fullmatch(r"0\.0\.0\+src[0-9a-f]{10}", built.version)
    assert built.path.name == f"trainer-{built.version}.tar.gz"

    # Install it the way a replica does and import the subpackage.
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--no-build-isolation", "--target", str(site), str(built.path)],
        check=True, capture_output=True, cwd=tmp_path,
    )
    assert (site / "trainer/model/layers.py").is_file()  # gcloud's generated setup drops it
    assert (site / "trainer/assets/config.json").is_file()
    probe = subprocess.run(
        [sys.executable, "-c", "from trainer.model import layers; print(layers.describe())"],
        check=True, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)},
    )
    assert probe.stdout.strip() == "two dense layers"


def test_generated_version_follows_the_sources(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    (package_dir / "task.py").write_text("print('changed')\n")
    second = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert first.version != second.version
    assert first.sha256 != second.sha256


# -- reproducibility ---------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["with_setup_py", "with_pyproject", "no_setup"])
def test_same_sources_give_byte_identical_archives(tmp_path: Path, fixture: str) -> None:
    one = build_package(project(tmp_path, fixture, into="a"), cache_dir=tmp_path / "cache-a")
    other_copy = project(tmp_path, fixture, into="b/deeper")
    for path in other_copy.parent.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))  # `touch`: new mtimes, same content
    other = build_package(other_copy, cache_dir=tmp_path / "cache-b")
    assert other.reused_from_cache is False  # a real second build, not the cache
    assert one.sha256 == other.sha256
    assert one.path.read_bytes() == other.path.read_bytes()


def test_archive_metadata_is_normalised(tmp_path: Path) -> None:
    built = build_package(project(tmp_path, "no_setup"), cache_dir=tmp_path / "cache")
    infos = members(built)
    assert [m.name for m in infos] == sorted(m.name for m in infos)
    for info in infos:
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (REPRODUCIBLE_MTIME, 0, 0, "", "")
        assert info.mode in (0o644, 0o755)
        assert not info.pax_headers
    header = built.path.read_bytes()[:10]
    assert header[:2] == b"\x1f\x8b"
    assert header[3] & 0x08 == 0  # FNAME flag: no file name stored
    assert header[4:8] == b"\0\0\0\0"  # gzip mtime
    with gzip.open(built.path) as stream:
        assert stream.read()  # a valid gzip stream


# -- cache -------------------------------------------------------------------------------------


def test_unchanged_sources_come_from_the_cache_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package_dir = project(tmp_path, "with_setup_py")
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    cached_mtime = first.path.stat().st_mtime_ns
    for path in package_dir.parent.rglob("*"):
        os.utime(path, (1_600_000_000, 1_600_000_000))  # touched, not changed
    # Any build subprocess would now fail: a hit must not start one.
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    second = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert second.reused_from_cache is True
    assert (second.path, second.sha256, second.files) == (first.path, first.sha256, first.files)
    assert second.path.stat().st_mtime_ns == cached_mtime


def test_cache_ignores_caches_vcs_and_build_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package_dir = project(tmp_path, "no_setup")
    root = package_dir.parent
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    (package_dir / "__pycache__").mkdir()
    (package_dir / "__pycache__/task.cpython-311.pyc").write_bytes(b"\0bytecode")
    (root / ".git").mkdir()
    (root / ".git/HEAD").write_text("ref: refs/heads/main\n")
    (root / "build/lib").mkdir(parents=True)
    (root / "dist").mkdir()
    (root / "dist/old-0.1.tar.gz").write_bytes(b"old")
    (root / "trainer.egg-info").mkdir()
    (root / ".venv/lib").mkdir(parents=True)
    (root / "env").mkdir()
    (root / "env/pyvenv.cfg").write_text("home = /usr\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    again = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert again.reused_from_cache is True
    assert again.sha256 == first.sha256


def test_a_build_subpackage_named_build_is_not_skipped(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    (package_dir / "build").mkdir()
    (package_dir / "build/__init__.py").write_text("")
    relative = [f.relative for f in collect_sources(package_dir.parent)]
    assert "trainer/build/__init__.py" in relative


def test_gcloudignore_keeps_files_out_of_the_package_and_the_key(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    root = package_dir.parent
    (root / "data").mkdir()
    (root / "data/train.csv").write_text("x,y\n")
    (package_dir / "notes.ipynb").write_text("{}")
    (package_dir / "assets/big.bin").write_bytes(b"\0" * 1000)
    (package_dir / "assets/keep.bin").write_bytes(b"\1")
    (root / ".gitignore").write_text("# from git\n*.ipynb\n")
    (root / ".gcloudignore").write_text(
        "/data/\n*.bin\n!trainer/assets/keep.bin\n#!include:.gitignore\n")
    built = build_package(package_dir, cache_dir=tmp_path / "cache")
    names = {Path(m.name).relative_to(Path(m.name).parts[0]).as_posix() for m in members(built)}
    assert "trainer/assets/keep.bin" in names and "trainer/task.py" in names
    assert not {"trainer/assets/big.bin", "trainer/notes.ipynb"} & names  # grafted but for the ignore file
    sources = {f.relative for f in collect_sources(root)}
    assert "data/train.csv" not in sources and "README.md" in sources
    assert ".gcloudignore" in sources  # a source like any other, unless it names itself

    # Ignored files do not change the cache key; the ignore file itself does.
    (root / "data/train.csv").write_text("x,y\n1,2\n")
    assert build_package(package_dir, cache_dir=tmp_path / "cache").reused_from_cache is True
    (root / ".gcloudignore").write_text("/data/\n*.bin\n#!include:.gitignore\n")
    rebuilt = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert rebuilt.reused_from_cache is False
    assert "trainer/assets/keep.bin" not in {f.relative for f in collect_sources(root)}


def test_an_ignored_directory_is_not_walked_and_anchoring_counts(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    root = package_dir.parent
    for directory in ("logs", "trainer/logs"):
        (root / directory).mkdir()
        (root / directory / "run.txt").write_text("line")
    (root / ".gcloudignore").write_text("/logs/\n!logs/run.txt\n")
    relative = [f.relative for f in collect_sources(root)]
    assert "trainer/logs/run.txt" in relative  # `/logs/` is anchored at the package root
    assert "logs/run.txt" not in relative  # as in git, a file in an ignored directory stays out


def test_gcloudignore_that_drops_the_package_is_refused(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    (package_dir.parent / ".gcloudignore").write_text("trainer/\n")
    with pytest.raises(ValidationFailed) as raised:
        build_package(package_dir, cache_dir=tmp_path / "cache")
    [problem] = raised.value.problems
    assert problem.path == ".gcloudignore" and "trainer/__init__.py" in problem.message
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.parametrize(("files", "expected"), [
    ({".gcloudignore": "#!include:.gitignore\n"}, "does not exist"),
    ({".gcloudignore": "#!include:.gitignore\n", ".gitignore": "#!include:.other\n", ".other": "x\n"},
     "includes do not nest"),
])
def test_bad_includes_name_the_ignore_file(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    package_dir = project(tmp_path, "no_setup")
    for name, text in files.items():
        (package_dir.parent / name).write_text(text)
    with pytest.raises(ValidationFailed) as raised:
        build_package(package_dir, cache_dir=tmp_path / "cache")
    [problem] = raised.value.problems
    assert problem.path == ".gcloudignore"
    assert expected in f"{problem.message} {problem.hint}"


def test_changed_source_misses_the_cache(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "with_setup_py")
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    (package_dir / "task.py").write_text("print('new')\n")
    second = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert second.reused_from_cache is False
    assert second.sha256 != first.sha256
    assert first.path.is_file()  # the old entry stays for other checkouts


def test_executable_bit_is_part_of_the_key(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "with_setup_py")
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    (package_dir / "task.py").chmod(0o755)
    second = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert second.reused_from_cache is False
    assert second.sha256 != first.sha256


def test_damaged_cache_entry_is_rebuilt(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "with_setup_py")
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    first.path.write_bytes(first.path.read_bytes()[:50])  # truncated by a crash or a full disk
    second = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert second.reused_from_cache is False
    assert second.sha256 == first.sha256
    assert hashlib.sha256(second.path.read_bytes()).hexdigest() == first.sha256


def test_concurrent_builds_share_one_cache_entry(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    results: list[BuiltPackage] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def build() -> None:
        try:
            barrier.wait()
            results.append(build_package(package_dir, cache_dir=tmp_path / "cache"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({r.sha256 for r in results}) == 1
    assert len({r.path for r in results}) == 1
    entries = list((tmp_path / "cache").iterdir())
    assert len(entries) == 1  # no temporary directories left behind
    assert hashlib.sha256(results[0].path.read_bytes()).hexdigest() == results[0].sha256


def test_default_cache_dir_is_under_aiptrain_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIPTRAIN_HOME", str(tmp_path / "home"))
    built = build_package(project(tmp_path, "with_setup_py"))
    assert built.path.is_relative_to(tmp_path / "home" / "cache" / "sdist")


def fake_dist_info(directory: Path, dirname: str, name: str, version: str) -> Path:
    """A minimal installed-distribution directory, as pip leaves it in site-packages."""
    info = directory / dirname
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nLong text.\n")
    return info


def test_setuptools_version_matches_importlib_metadata() -> None:
    import importlib.metadata

    assert packaging_cache.setuptools_version() == importlib.metadata.version("setuptools")


def test_another_setuptools_first_on_the_path_changes_the_cache_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = packaging_cache.cache_key("trainer", "0" * 64)
    shadow = tmp_path / "shadow"
    # Look-alike names that are other projects must not be taken for setuptools.
    fake_dist_info(shadow, "setuptools_scm-8.0.dist-info", "setuptools_scm", "8.0")
    fake_dist_info(shadow, "setuptools-rust-1.5.dist-info", "setuptools-rust", "1.5")
    monkeypatch.setattr(sys, "path", [str(shadow), *sys.path])
    assert packaging_cache.cache_key("trainer", "0" * 64) == before
    fake_dist_info(shadow, "setuptools-99.1.0.dist-info", "setuptools", "99.1.0")
    assert packaging_cache.setuptools_version() == "99.1.0"
    assert packaging_cache.cache_key("trainer", "0" * 64) != before


def test_setuptools_version_falls_back_when_the_path_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(tmp_path)])
    assert packaging_cache.setuptools_version_on_path(sys.path) is None
    assert packaging_cache.setuptools_version() == "none"  # importlib.metadata agrees: nothing on this path


def test_built_packages_compare_by_value(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "with_setup_py")
    built = build_package(package_dir, cache_dir=tmp_path / "cache")
    hit = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert hit == build_package(package_dir, cache_dir=tmp_path / "cache")
    assert hit != built  # one came from the cache
    assert (hit.path, hit.sha256, hit.files) == (built.path, built.sha256, built.files)
    assert repr(hit).startswith("BuiltPackage(") and "reused_from_cache=True" in repr(hit)


def test_a_cache_hit_imports_no_build_machinery(tmp_path: Path) -> None:
    """A hit is interpreter start-up plus imports; the build-only modules stay unloaded."""
    package_dir = project(tmp_path, "with_setup_py")
    build_package(package_dir, cache_dir=tmp_path / "cache")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from aiptrain._packaging import build_package\n"
        f"built = build_package(Path({str(package_dir)!r}), cache_dir=Path({str(tmp_path / 'cache')!r}))\n"
        "assert built.reused_from_cache\n"
        "heavy = ['importlib.metadata', 'tarfile', 'gzip', 'subprocess', 'email.parser', 'tomllib', 'shutil',\n"
        "         'dataclasses', 'typing', 'aiptrain.errors']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


# -- the user's tree ---------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["with_setup_py", "with_pyproject", "no_setup", "failing_setup"])
def test_the_users_tree_is_left_untouched(tmp_path: Path, fixture: str) -> None:
    package_dir = project(tmp_path, fixture)
    root = package_dir.parent
    before = snapshot(root)
    try:
        build_package(package_dir, cache_dir=tmp_path / "cache")
    except UsageError:
        assert fixture == "failing_setup"
    assert snapshot(root) == before  # no egg-info, dist/, build/, setup.py or MANIFEST.in


# -- bad input ---------------------------------------------------------------------------------


def test_missing_package_path(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailed) as caught:
        build_package(tmp_path / "nope", cache_dir=tmp_path / "cache")
    assert caught.value.exit_code == 2
    [problem] = caught.value.problems
    assert problem.path == "--package-path"
    assert f"{tmp_path / 'nope'} does not exist" in problem.message


def test_package_path_that_is_a_file(tmp_path: Path) -> None:
    module = tmp_path / "task.py"
    module.write_text("")
    [problem] = check_package_path(module)
    assert "is not a directory" in problem.message


def test_missing_init_names_the_directory(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "missing_init")
    with pytest.raises(ValidationFailed) as caught:
        build_package(package_dir, cache_dir=tmp_path / "cache")
    assert caught.value.exit_code == 2
    [problem] = caught.value.problems
    assert problem.message == f"{package_dir} is not a Python package: it has no __init__.py"
    assert problem.hint is not None
    assert f"create {package_dir / '__init__.py'}" in problem.hint
    assert "--package-path must point at the package directory itself" in problem.hint
    assert not (tmp_path / "cache").exists()


def test_pointing_at_the_project_directory_suggests_the_package(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "with_setup_py")
    [problem] = check_package_path(package_dir.parent)
    assert problem.hint is not None
    assert f"did you mean --package-path {package_dir}?" in problem.hint


def test_invalid_package_name_without_setup(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    renamed = package_dir.rename(package_dir.parent / "my-trainer")
    [problem] = check_package_path(renamed)
    assert "'my-trainer' is not a valid Python package name" in problem.message


def test_good_package_paths_have_no_problems(tmp_path: Path) -> None:
    assert check_package_path(project(tmp_path, "with_setup_py")) == []
    assert check_package_path(str(project(tmp_path, "no_setup"))) == []


def test_failing_setup_shows_the_tail_of_its_output(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "failing_setup")
    with pytest.raises(UsageError) as caught:
        build_package(package_dir, cache_dir=tmp_path / "cache")
    error = caught.value
    assert error.exit_code == 2
    assert f"packaging the trainer in {package_dir.parent} failed" in error.message
    assert "deliberate failure in the fixture setup.py" in error.message
    shown = re.findall(r"noise line (\d+)$", error.message, flags=re.MULTILINE)
    assert "59" in shown
    assert "0" not in shown  # only the last lines
    assert len(error.message.splitlines()) <= 41
    assert error.hint is not None and "setup.py sdist" in error.hint
    assert list((tmp_path / "cache").iterdir()) == []  # nothing cached


def test_setup_py_that_builds_nothing(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        build_package(project(tmp_path, "empty_setup"), cache_dir=tmp_path / "cache")
    assert caught.value.exit_code == 2
    assert "produced no .tar.gz sdist" in caught.value.message
    assert caught.value.hint is not None and "calls setup()" in caught.value.hint


def test_uninstalled_build_backend_is_named(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "with_pyproject")
    pyproject = package_dir.parent / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("setuptools.build_meta", "no_such_backend.api"))
    with pytest.raises(UsageError) as caught:
        build_package(package_dir, cache_dir=tmp_path / "cache")
    assert caught.value.exit_code == 2
    assert "'no_such_backend.api' is not installed" in caught.value.message


def test_duplicate_basenames() -> None:
    problems = check_duplicate_basenames([Path("a/pkg.tar.gz"), Path("b/pkg.tar.gz"), Path("c/other.whl")])
    [problem] = problems
    assert problem.path == "--packages"
    assert problem.message == "cannot upload multiple packages with the same file name: pkg.tar.gz"
    assert problem.hint is not None and "a/pkg.tar.gz" in problem.hint and "b/pkg.tar.gz" in problem.hint
    assert check_duplicate_basenames([Path("a.tar.gz"), Path("b.tar.gz")]) == []


def test_generated_version_ignores_files_beside_the_package(tmp_path: Path) -> None:
    package_dir = project(tmp_path, "no_setup")
    root = package_dir.parent
    first = build_package(package_dir, cache_dir=tmp_path / "cache")
    (root / "data").mkdir()
    (root / "data/x.csv").write_text("x,y\n")
    (root / "NOTES.txt").write_text("try a bigger batch\n")
    (root / "README.md").write_text("changed\n")
    second = build_package(package_dir, cache_dir=tmp_path / "cache")
    assert (second.version, second.sha256) == (first.version, first.sha256)
    third = build_package(package_dir, cache_dir=tmp_path / "other-cache")  # a real build, same bytes
    assert third.reused_from_cache is False
    assert third.sha256 == first.sha256
    inner = [name.split("/", 1)[1] for name in first.files]
    assert not [name for name in inner if name in {"README.md", "NOTES.txt"} or name.startswith("data/")]
    assert "trainer/model/layers.py" in inner


def test_generated_build_does_not_walk_beside_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package_dir = project(tmp_path, "no_setup")
    data = package_dir.parent / "data"
    data.mkdir()
    for index in range(30):
        (data / f"shard-{index}.csv").write_text("x\n")
    # More files beside the package than the limit allows: only a walk of the whole root hits it.
    monkeypatch.setattr(packaging_sources, "MAX_SOURCE_FILES", 20)
    assert build_package(package_dir, cache_dir=tmp_path / "cache").generated_setup is True
    with pytest.raises(UsageError):
        collect_sources(package_dir.parent)
