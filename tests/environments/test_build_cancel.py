"""Cancelling while a runtime environment is being built: nothing half-built is ever published.

The build is held still without sleeping: uv is pointed at a package index of the test's own that
answers nothing until the test lets it, so the build is known to be half-way (its staging
directory made, `uv pip install` waiting) the moment the index is first asked.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._environments.store import BuildCancelled, Environment, EnvironmentStore
from aiptrain._job.spec import JobState
from aiptrain._replicas.processes import TOKEN_VARIABLE, tokened_processes
from tests.fixtures.engine import wait_until
from tests.fixtures.held_index import HeldIndex

from .conftest import aiptrain, describe, submit
from .test_environment_store import small_resolution

PROJECT = "local-project"


def published(root: Path) -> list[str]:
    """What a later job could pick up: environments and staging directories (not logs or locks)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.name not in (".logs", ".locks"))


def test_a_build_stopped_half_way_publishes_nothing_and_the_next_build_succeeds(
        tmp_path: Path, held_index: HeldIndex) -> None:
    store = EnvironmentStore(tmp_path / "envs")
    resolution = small_resolution("six==1.16.0")
    stop = threading.Event()
    lines: list[str] = []
    outcome: list[Environment | BaseException] = []

    def build() -> None:
        try:
            outcome.append(store.ensure(resolution, progress=lines.append, stop=stop, extra_env={
                "UV_DEFAULT_INDEX": held_index.url, TOKEN_VARIABLE: "held-build"}))
        except BaseException as error:  # the test looks at what it was
            outcome.append(error)

    builder = threading.Thread(target=build)
    builder.start()
    assert held_index.reached.wait(120), f"uv never asked the index: {lines}"
    assert lines[0].startswith("Building runtime 2.11 on Python 3.7 as of 2023-11-18: six 1.16.0")
    assert [name for name in published(store.root) if name.startswith(".tmp-")], "the build has no staging dir"
    stop.set()
    builder.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], BuildCancelled), outcome
    assert published(store.root) == []
    assert store.find(resolution) is None
    assert tokened_processes("held-build") == [], "uv was left running"
    # Nothing is in the way of the next build (the lock is free, no staging to trip over).
    again = store.ensure(resolution, progress=lambda _line: None)
    assert again.installed() == {"six": "1.16.0"}
    assert published(store.root) == [again.key]


def test_a_job_cancelled_while_its_environment_builds_ends_cancelled_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: LocalJobEngine, held_index: HeldIndex) -> None:
    envs = tmp_path / "envs"
    monkeypatch.delenv("AIPTRAIN_LOCAL_PYTHON", raising=False)
    monkeypatch.setenv("AIPTRAIN_ENVS_DIR", str(envs))
    monkeypatch.setenv("UV_DEFAULT_INDEX", held_index.url)
    submitted = submit("cancel_build", "compat_v1", "--runtime-version", "2.11", "--job-dir", "gs://envtests/cb",
                       stream=False)
    assert submitted.returncode == 0, submitted.stderr
    assert held_index.reached.wait(300), "the job's build never asked the package index"
    first = "Building runtime 2.11 on Python 3.7 as of 2023-11-18: tensorflow-cpu 2.11.0"
    wait_until(lambda: any(entry.message.startswith(first) for entry in engine.logs(PROJECT, "cancel_build")),
               what="the build's first line in the job's log")

    cancelled = aiptrain("jobs", "cancel", "cancel_build")
    assert cancelled.returncode == 0, cancelled.stderr
    waited = aiptrain("jobs", "wait", "cancel_build", "--timeout", "120")
    assert waited.returncode == 11, waited.stderr  # CANCELLED
    assert describe("cancel_build")["state"] == "CANCELLED"
    history = [change.state for change in engine.state_history(PROJECT, "cancel_build")]
    assert JobState.RUNNING not in history and history[-2:] == [JobState.CANCELLING, JobState.CANCELLED]
    assert published(envs) == []
    run_token = engine.processes(PROJECT, "cancel_build").run_token
    assert tokened_processes(run_token) == [], "the build's processes outlived the job"


def test_a_build_killed_by_a_signal_says_so(tmp_path: Path, held_index: HeldIndex) -> None:
    import os
    import signal

    from aiptrain._environments.store import EnvironmentBuildFailed

    store = EnvironmentStore(tmp_path / "envs")
    outcome: list[Environment | BaseException] = []

    def build() -> None:
        try:
            outcome.append(store.ensure(small_resolution("six==1.16.0"), progress=lambda _line: None,
                                        extra_env={"UV_DEFAULT_INDEX": held_index.url, TOKEN_VARIABLE: "killed-build"}))
        except BaseException as error:  # the test looks at what it was
            outcome.append(error)

    builder = threading.Thread(target=build)
    builder.start()
    assert held_index.reached.wait(120), "uv never asked the index"
    for pid in tokened_processes("killed-build"):
        os.kill(pid, signal.SIGKILL)
    builder.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], EnvironmentBuildFailed), outcome
    assert "killed by SIGKILL" in outcome[0].message, outcome[0].message
    assert "Using Python" not in outcome[0].message
    assert published(store.root) == []
