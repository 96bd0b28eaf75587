"""Container jobs on an engine that goes away, and in a home whose path holds `:`, on the suite's
Docker daemon.

A job whose engine goes away mid-run (its daemon killed; here a relay to the daemon that the test
cuts and restores, tests/fixtures/engine_relay.py) fails saying so, not with the engine's
command-line status (125); what it created, which the engine could not remove then, is removed
by the next container job once the engine answers again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiptrain._backends.local.backend import LocalBackend
from aiptrain._job.spec import JobState
from aiptrain._paths import HomeLayout
from tests.backends.local.test_container_jobs import container_input, lines, on_daemon
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.engine_relay import relayed_engine
from tests.fixtures.local_jobs import make_job, wait_for_end, wait_until

pytestmark = pytest.mark.containers


def test_a_job_whose_engine_goes_away_says_so_and_its_leftovers_go_with_the_next_job(
    backend: LocalBackend, home: Path, docker: SuiteDocker, images: SuiteImages, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    with relayed_engine(docker, monkeypatch, tmp_path) as relay:
        backend.create_job(make_job("abandoned", container_input(images["shell"], args=["echo started; sleep 600"])))
        wait_until(lambda: "started" in lines(backend, "abandoned"), what="the container to start")
        token = backend.engine.store.get("test-project", "abandoned").run_token
        relay.cut()
        done = wait_for_end(backend.engine, "abandoned")
        assert done.state == JobState.FAILED
        message = done.error_message or ""
        assert message.startswith("The replica master 0 lost its container engine: Docker stopped answering"), \
            message
        assert "non-zero status of 125" not in message
        assert on_daemon(docker, token)  # still there: nobody could remove them
        assert list(HomeLayout.of(home).container_leftovers.iterdir())
        relay.restore()
        backend.create_job(make_job("next", container_input(images["shell"], args=["echo next"])))
        assert wait_for_end(backend.engine, "next").state == JobState.SUCCEEDED
        assert on_daemon(docker, token) == []
        assert list(HomeLayout.of(home).container_leftovers.iterdir()) == []


def test_a_home_whose_path_holds_colons_runs_container_jobs(
    docker: SuiteDocker, images: SuiteImages, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replica's mounts (the endpoints' CA under the home) hold the home's `:`s, as the manual allows."""
    from aiptrain._backends import get_backend
    from aiptrain._backends.base import BackendSettings
    from tests.fixtures.local_jobs import PROJECT, kill_everything

    colon_home = tmp_path / "home:with:colons"
    colon_home.mkdir(mode=0o700)
    monkeypatch.setenv("AIPTRAIN_HOME", str(colon_home))
    backend = get_backend("local", BackendSettings(project=PROJECT, home=colon_home))
    assert isinstance(backend, LocalBackend)
    try:
        script = "cat $CURL_CA_BUNDLE | head -1"
        backend.create_job(make_job("colons", container_input(images["shell"], args=[script])))
        done = wait_for_end(backend.engine, "colons")
        assert done.state == JobState.SUCCEEDED, done.error_message
        assert "-----BEGIN CERTIFICATE-----" in lines(backend, "colons")
    finally:
        kill_everything(backend.engine)
