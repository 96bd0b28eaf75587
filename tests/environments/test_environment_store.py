"""The environment store with small package sets (seconds to build): atomic builds, the lock,
kept logs, resolver failures, and the `local envs` commands."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from aiptrain._environments.resolution import RuntimeResolution, resolve_version
from aiptrain._environments.store import EnvironmentBuildFailed, EnvironmentStore
from aiptrain._job.catalog import load_catalog

from .conftest import aiptrain

pytestmark = pytest.mark.runtime_envs


def small_resolution(*packages: str) -> RuntimeResolution:
    """Runtime 2.11 with its packages swapped for a few small ones."""
    real = resolve_version("2.11", load_catalog())
    assert real is not None
    return replace(real, name="small", packages=packages)


def test_build_is_published_whole_with_its_log_and_constraints(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    resolution = small_resolution("six==1.16.0")
    lines: list[str] = []
    environment = store.ensure(resolution, progress=lines.append)
    assert lines[0].startswith("Building runtime 2.11 on Python 3.7 as of 2023-11-18: six 1.16.0 (log: ")
    assert lines[1].startswith("Installing with package index ")
    assert environment.installed() == {"six": "1.16.0"}
    assert "six==1.16.0" in environment.constraints.read_text()
    assert "six==1.16.0" in store.log_path(environment.key).read_text()
    assert [p.name for p in store.root.iterdir() if not p.name.startswith(".")] == [environment.key]
    assert not list(store.root.glob(".tmp-*"))
    # Found again without building; another package set is another environment.
    again: list[str] = []
    assert store.ensure(resolution, progress=again.append) == environment and again == []
    assert store.key_for(small_resolution("six==1.15.0")) != environment.key
    # A moved day or another reading of a package's metadata is another environment too.
    assert store.key_for(replace(resolution, cutoff="2024-01-01")) != environment.key
    assert store.key_for(replace(resolution, dependency_metadata={"six==1.16.0": ("x>=1",)})) != environment.key


def test_an_environment_is_built_as_of_its_runtimes_day(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    # tabulate left open: 0.8.7 (2020-03-31) is the newest by 2020-12-19; 0.8.8 came on 2021-02-22.
    environment = store.ensure(replace(small_resolution("tabulate"), cutoff="2020-12-19"), progress=lambda _: None)
    assert environment.installed() == {"tabulate": "0.8.7"}
    log = store.log_path(environment.key).read_text()
    assert "--exclude-newer 2020-12-20T00:00:00Z" in log  # the next midnight, in UTC
    assert "--exclude-newer-package setuptools=false --exclude-newer-package wheel=false" in log
    assert environment.manifest()["cutoff"] == "2020-12-19" and environment.uv_config.is_file()


def test_a_killed_build_leaves_nothing_that_is_used(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    resolution = small_resolution("six==1.16.0")
    key = store.key_for(resolution)
    # What a build killed half-way leaves: its staging directory, and (worst case) a directory
    # under the final name without a manifest.
    (store.root / f".tmp-{key}-killed" / "bin").mkdir(parents=True)
    (store.root / key / "bin").mkdir(parents=True)
    assert store.find(resolution) is None
    environment = store.ensure(resolution, progress=lambda _line: None)
    assert environment.manifest()["key"] == key
    assert not list(store.root.glob(".tmp-*"))


def test_two_builders_of_one_environment_build_it_once(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    resolution = small_resolution("six==1.16.0")
    logs: list[list[str]] = [[], []]
    results = []

    def build(index: int) -> None:
        results.append(store.ensure(resolution, progress=logs[index].append))

    threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert len(results) == 2 and results[0] == results[1]
    builds = [line for log in logs for line in log if line.startswith("Building runtime")]
    assert len(builds) == 1, logs


def test_resolver_failure_names_the_package_and_leaves_no_environment(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    resolution = small_resolution("six==0.0.42")
    with pytest.raises(EnvironmentBuildFailed) as failed:
        store.ensure(resolution, progress=lambda _line: None)
    message = failed.value.message
    assert message.startswith("Building the environment of runtime 2.11 failed: ")
    assert "six==0.0.42" in message and "unsatisfiable" in message
    assert message.endswith(f"(full log: {failed.value.log}).")
    assert failed.value.log is not None and "six==0.0.42" in failed.value.log.read_text()
    assert [p.name for p in store.root.iterdir() if not p.name.startswith(".")] == []
    assert not list(store.root.glob(".tmp-*"))


def test_local_envs_commands_list_build_and_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  built_environment: object, shared_envs_dir: Path) -> None:
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(shared_envs_dir))
    built = aiptrain("local", "envs", "build", "1.15", "--python-version", "3.7")
    assert built.returncode == 0, built.stderr
    assert "Building runtime" not in built.stderr  # the session built it already
    assert "Runtime version 1.15 with Python 3.7: TensorFlow 1.15.0 on Python 3.7" in built.stderr
    listed = aiptrain("local", "envs", "list", "--format", "json")
    rows = json.loads(listed.stdout)
    assert [row["path"] for row in rows] == [built.stdout.strip()]
    assert rows[0]["name"] == "runtime-1.15" and rows[0]["runtimeVersions"] == ["1.15"]
    assert rows[0]["python"] == "3.7"
    assert rows[0]["sizeBytes"] > rows[0]["ownBytes"] > 0  # most files are links into uv's cache
    unknown = aiptrain("local", "envs", "build", "1.99")
    assert unknown.returncode == 2 and "runtime versions: 1.0, 1.1" in unknown.stderr
    # rm on a copy of the store: the shared environment stays for the other tests.
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(tmp_path / "other"))
    small = EnvironmentStore(tmp_path / "other").ensure(small_resolution("six==1.16.0"), progress=lambda _l: None)
    missing = aiptrain("local", "envs", "rm", "nosuchkey", "2.11")  # 2.11's full set is not built here
    assert missing.returncode == 2 and "no such environment: nosuchkey, 2.11" in missing.stderr
    removed = aiptrain("local", "envs", "rm", small.key)
    assert removed.returncode == 0 and not small.root.exists()


def test_a_damaged_environment_is_reported_and_rebuilt_once(tmp_path: Path) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    resolution = small_resolution("six==1.16.0")
    environment = store.ensure(resolution, progress=lambda _line: None)
    module = next(environment.root.glob("lib/python*/site-packages/six.py"))
    module.unlink()
    [info] = store.entries()
    assert info.damage is not None and "missing" in info.damage
    lines: list[str] = []
    rebuilt = store.ensure(resolution, progress=lines.append)
    assert sum("is damaged" in line and "rebuilding it" in line for line in lines) == 1, lines
    assert next(rebuilt.root.glob("lib/python*/site-packages/six.py")).is_file()
    assert [entry.damage for entry in store.entries()] == [None]
    again: list[str] = []
    assert store.ensure(resolution, progress=again.append) == rebuilt and again == []
