"""The install cache: each package is pip-installed once, and every job's site is filled from it."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._environments import install_cache
from aiptrain._environments.preparation import install_packages
from aiptrain._job.spec import JobState
from aiptrain._packaging import build_package
from tests.fixtures.local_jobs import PROJECT, TRAINERS, make_job, training_input, wait_for_end


class RecordingSink:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def emit(
        self,
        task_name: str,
        severity: str,
        message: str,
        *,
        trial_id: str | None = None,
        captured: datetime | None = None,
        from_stderr: bool = False,
    ) -> None:
        with self._lock:
            self.lines.append(message)


def install(home: Path, uris: list[str], site: Path, sink: RecordingSink, stop: threading.Event | None = None,
            python: str = sys.executable) -> str | None:
    return install_packages(
        uris,
        site_dir=site,
        storage_root=home / "storage",
        python=python,
        base_env=dict(os.environ),
        run_token="install-cache-test",
        sink=sink,
        stop=stop or threading.Event(),
        kill_grace=3.0,
    )


def entries(home: Path) -> list[Path]:
    """Everything in the cache directory: complete entries and any temporary leftovers."""
    cache = install_cache.install_cache_dir(home)
    return sorted(cache.iterdir()) if cache.is_dir() else []


def stage(home: Path, package: Path, name: str | None = None) -> str:
    target = home / "storage" / "staging" / "packages" / (name or package.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(package, target)
    return f"gs://staging/packages/{target.name}"


def service_lines(engine: LocalJobEngine, job_id: str) -> list[str]:
    return [e.message for e in engine.logs(PROJECT, job_id) if e.task_name == "service"]


def test_a_second_job_with_the_same_package_reuses_the_install(
    engine: LocalJobEngine, home: Path, package_uri: str
) -> None:
    engine.submit(PROJECT, make_job("first", training_input(package_uri, "tfcfg.quick", job_dir="gs://out/first")))
    assert wait_for_end(engine, "first").state == JobState.SUCCEEDED
    assert any(m.startswith(f"Installing package(s): {package_uri}") for m in service_lines(engine, "first"))
    [entry] = entries(home)
    before = [(p, p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(entry.rglob("*"))]
    month_ago = time.time() - 31 * 86400
    os.utime(entry, (month_ago, month_ago))

    engine.submit(PROJECT, make_job("second", training_input(package_uri, "tfcfg.quick", job_dir="gs://out/second")))
    done = wait_for_end(engine, "second")
    assert done.state == JobState.SUCCEEDED, done.error_message
    lines = service_lines(engine, "second")
    assert f"Reusing installed package {package_uri} (cached)" in lines
    assert not any(m.startswith("Installing package(s)") for m in lines)
    assert entries(home) == [entry]
    # Nothing in the entry was rewritten; only its own mtime moved: it records the last use.
    assert [(p, p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(entry.rglob("*"))] == before
    assert entry.stat().st_mtime > month_ago + 86400
    # The replicas imported the package from the job's own site directory.
    assert (home / "storage" / "out" / "second" / "times.json").is_file()


def test_concurrent_first_installs_leave_one_good_entry(home: Path, package_uri: str) -> None:
    sinks = [RecordingSink() for _ in range(3)]
    results: list[str | None] = [None] * 3
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = install(home, [package_uri], home / f"job{index}" / "site", sinks[index])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and results == [None, None, None]
    [entry] = entries(home)  # one entry, no temporary directories left behind
    assert install_cache.lookup(entry.parent, entry.name) is not None
    expected = sorted(p.relative_to(entry / "site") for p in (entry / "site").rglob("*"))
    for index in range(3):
        site = home / f"job{index}" / "site"
        assert (site / "tfcfg" / "quick.py").is_file()
        assert sorted(p.relative_to(site) for p in site.rglob("*")) == expected


def test_a_changed_package_gets_a_new_entry(home: Path, package_uri: str, tmp_path: Path) -> None:
    sink = RecordingSink()
    assert install(home, [package_uri], home / "a" / "site", sink) is None
    [first] = entries(home)

    project = tmp_path / "project"
    shutil.copytree(TRAINERS, project)
    (project / "tfcfg" / "added.py").write_text("VALUE = 2\n")
    changed = build_package(project / "tfcfg", cache_dir=tmp_path / "sdist-cache").path
    changed_uri = stage(home, changed, "changed-" + changed.name)
    assert install(home, [changed_uri], home / "b" / "site", sink) is None
    assert f"Installing package(s): {changed_uri}" in sink.lines
    assert len(entries(home)) == 2 and first in entries(home)
    assert (home / "b" / "site" / "tfcfg" / "added.py").read_text() == "VALUE = 2\n"
    assert not (home / "a" / "site" / "tfcfg" / "added.py").exists()


def test_installing_a_new_package_removes_entries_unused_for_a_month(
    home: Path, package_uri: str, tmp_path: Path
) -> None:
    sink = RecordingSink()
    assert install(home, [package_uri], home / "a" / "site", sink) is None
    [first] = entries(home)
    month_ago = time.time() - 31 * 86400
    os.utime(first, (month_ago, month_ago))
    assert install(home, [package_uri], home / "b" / "site", sink) is None  # a reuse marks it used
    assert entries(home) == [first] and first.stat().st_mtime > month_ago

    os.utime(first, (month_ago, month_ago))
    project = tmp_path / "project"
    shutil.copytree(TRAINERS, project)
    (project / "tfcfg" / "added.py").write_text("VALUE = 3\n")
    changed = build_package(project / "tfcfg", cache_dir=tmp_path / "sdist-cache").path
    assert install(home, [stage(home, changed, "changed-" + changed.name)], home / "c" / "site", sink) is None
    [second] = entries(home)
    assert second != first
    assert (home / "a" / "site" / "tfcfg").is_dir()  # jobs keep their files (links) when an entry goes


def test_files_a_job_adds_to_its_site_stay_its_own(home: Path, package_uri: str) -> None:
    sink = RecordingSink()
    assert install(home, [package_uri], home / "a" / "site", sink) is None
    (home / "a" / "site" / "tfcfg" / "written_by_the_trainer.py").write_text("VALUE = 1\n")
    assert install(home, [package_uri], home / "b" / "site", sink) is None
    assert sink.lines.count(f"Reusing installed package {package_uri} (cached)") == 1
    assert not (home / "b" / "site" / "tfcfg" / "written_by_the_trainer.py").exists()
    [entry] = entries(home)
    assert not list(entry.rglob("written_by_the_trainer.py"))
    # The files the jobs share are the entry's own, not copies.
    quick = [home / job / "site" / "tfcfg" / "quick.py" for job in ("a", "b")]
    assert {path.stat().st_ino for path in quick} == {(entry / "site" / "tfcfg" / "quick.py").stat().st_ino}


def test_an_entry_a_trainer_rewrote_in_place_is_installed_again(home: Path, package_uri: str) -> None:
    sink = RecordingSink()
    assert install(home, [package_uri], home / "a" / "site", sink) is None
    with (home / "a" / "site" / "tfcfg" / "quick.py").open("a") as linked:  # in place: the shared file
        linked.write("raise SystemExit('edited by a trainer')\n")
    assert install(home, [package_uri], home / "b" / "site", sink) is None
    assert f"Reusing installed package {package_uri} (cached)" not in sink.lines
    assert "edited by a trainer" not in (home / "b" / "site" / "tfcfg" / "quick.py").read_text()
    [entry] = entries(home)
    assert "edited by a trainer" not in (entry / "site" / "tfcfg" / "quick.py").read_text()
    assert install(home, [package_uri], home / "c" / "site", sink) is None  # the new entry is reused
    assert sink.lines.count(f"Reusing installed package {package_uri} (cached)") == 1


def test_several_packages_merge_in_order(home: Path, trainer_sdist: Path, tmp_path: Path) -> None:
    """Directories merge and the later package's file wins, as with one pip --target install."""
    project = tmp_path / "project"
    shutil.copytree(TRAINERS, project)
    (project / "tfcfg" / "quick.py").write_text("print('second package')\n")
    (project / "tfcfg" / "extra.py").write_text("")
    second = build_package(project / "tfcfg", cache_dir=tmp_path / "sdist-cache").path
    uris = [stage(home, trainer_sdist), stage(home, second, "second-" + second.name)]
    assert install(home, uris, home / "job" / "site", RecordingSink()) is None
    site = home / "job" / "site" / "tfcfg"
    assert (site / "quick.py").read_text() == "print('second package')\n"
    assert (site / "extra.py").is_file() and (site / "dump_env.py").is_file()


def test_a_failed_install_leaves_nothing_in_the_cache(home: Path) -> None:
    broken = home / "broken-1.0.tar.gz"
    broken.write_bytes(b"not an archive")
    uri = stage(home, broken)
    message = install(home, [uri], home / "job" / "site", RecordingSink())
    assert message is not None and message.startswith("Installing the package(s) with pip failed")
    assert entries(home) == []


def test_a_cancelled_install_leaves_nothing_in_the_cache(home: Path, package_uri: str) -> None:
    stop = threading.Event()
    stop.set()
    assert install(home, [package_uri], home / "job" / "site", RecordingSink(), stop=stop) is None
    assert entries(home) == []


def test_a_damaged_entry_is_replaced(home: Path, package_uri: str) -> None:
    assert install(home, [package_uri], home / "a" / "site", RecordingSink()) is None
    [entry] = entries(home)
    (entry / "installed.json").unlink()  # as if removed by hand half-way
    sink = RecordingSink()
    assert install(home, [package_uri], home / "b" / "site", sink) is None
    assert any(m.startswith("Installing package(s)") for m in sink.lines)
    assert entries(home) == [entry] and install_cache.lookup(entry.parent, entry.name) is not None
    assert (home / "b" / "site" / "tfcfg" / "quick.py").is_file()


def test_the_key_follows_the_bytes_the_name_and_the_interpreter(tmp_path: Path, trainer_sdist: Path) -> None:
    copy = tmp_path / trainer_sdist.name
    shutil.copy(trainer_sdist, copy)
    key = install_cache.cache_key(trainer_sdist, sys.executable)
    assert install_cache.cache_key(copy, sys.executable) == key  # where the file is does not matter
    renamed = tmp_path / ("renamed-" + trainer_sdist.name)
    shutil.copy(trainer_sdist, renamed)
    assert install_cache.cache_key(renamed, sys.executable) != key
    changed = tmp_path / "changed" / trainer_sdist.name
    changed.parent.mkdir()
    changed.write_bytes(trainer_sdist.read_bytes() + b"\0")
    assert install_cache.cache_key(changed, sys.executable) != key
    # A virtual environment's python is a symlink to its base interpreter; they are different keys.
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.realpath(sys.executable))
    assert install_cache.cache_key(trainer_sdist, str(link)) != key


def test_an_interpreter_named_by_command_is_found_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    by_name = install_cache.interpreter_identity(os.path.basename(sys.executable))
    assert by_name == install_cache.interpreter_identity(sys.executable)
    located, real, stamp = by_name.split("|")
    assert os.path.isabs(located) and os.path.isabs(real) and stamp != "missing"
