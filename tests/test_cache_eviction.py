"""Cache eviction: entries unused for AIPTRAIN_CACHE_MAX_AGE_DAYS go when a new one is added."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aiptrain._cache_eviction import MAX_AGE_SETTING, mark_used, remove_unused
from aiptrain._packaging import build_package
from aiptrain.errors import UsageError
from tests.packaging.test_packaging import project

DAY = 86400


def age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


def make_entries(cache: Path, *names: str) -> list[Path]:
    paths = []
    for name in names:
        (cache / name).mkdir(parents=True)
        (cache / name / "payload").write_text(name)
        paths.append(cache / name)
    return paths


def test_only_entries_unused_for_longer_than_the_age_are_removed(tmp_path: Path) -> None:
    old, recent, kept, staging = make_entries(tmp_path, "old", "recent", "kept", ".tmp-build")
    age(old, 31)
    age(recent, 29)
    age(kept, 90)
    age(staging, 90)
    (tmp_path / "stray-file").write_text("")
    age(tmp_path / "stray-file", 90)
    assert remove_unused(tmp_path, keep=kept) == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-build", "kept", "recent", "stray-file"]


def test_marking_an_entry_used_saves_it(tmp_path: Path) -> None:
    [entry] = make_entries(tmp_path, "entry")
    age(entry, 60)
    mark_used(entry)
    assert remove_unused(tmp_path) == []
    mark_used(tmp_path / "missing")  # an entry removed meanwhile is no error


def test_the_age_is_a_setting_and_zero_keeps_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = make_entries(tmp_path, "first", "second")
    age(first, 3)
    age(second, 1)
    monkeypatch.setenv(MAX_AGE_SETTING, "0")
    assert remove_unused(tmp_path) == []
    monkeypatch.setenv(MAX_AGE_SETTING, "2")
    assert remove_unused(tmp_path) == [first]
    monkeypatch.setenv(MAX_AGE_SETTING, "a month")
    with pytest.raises(UsageError) as raised:
        remove_unused(tmp_path)
    assert MAX_AGE_SETTING in str(raised.value) and raised.value.exit_code == 2
    assert second.is_dir()


def test_a_new_build_clears_old_builds_and_a_hit_keeps_its_entry(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    package_dir = project(tmp_path, "no_setup")
    first = build_package(package_dir, cache_dir=cache)
    age(first.path.parent, 45)
    assert build_package(package_dir, cache_dir=cache).reused_from_cache  # a hit refreshes it
    (package_dir / "task.py").write_text("print('second')\n")
    second = build_package(package_dir, cache_dir=cache)
    assert first.path.is_file() and second.path.is_file()

    age(first.path.parent, 45)
    (package_dir / "task.py").write_text("print('third')\n")
    third = build_package(package_dir, cache_dir=cache)
    assert not first.path.parent.exists()
    assert second.path.is_file() and third.path.is_file()
