"""A container engine that goes away while a replica runs, on the suite's Docker daemon.

The engine is reached through a Unix-socket relay this test owns (tests/fixtures/engine_relay.py):
cutting it is, for the engine's command line, exactly a daemon that was killed, while the
containers themselves run on in the daemon, as they did in the case this guards. The replica's end then says
that the engine went away (not the command line's own status, 125), and what the set created is
removed by the next replica set that uses the engine once it answers again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aiptrain._paths import HomeLayout
from aiptrain._replicas.containers.command import ContainerCommand
from aiptrain._replicas.containers.container_engine import find_engine, forget_engines
from aiptrain._replicas.containers.launcher import ContainerLauncher, ContainerProcess, ReplicaContainer
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.engine_relay import SocketRelay, relayed_engine

pytestmark = pytest.mark.containers


@pytest.fixture
def relay(docker: SuiteDocker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[SocketRelay]:
    with relayed_engine(docker, monkeypatch, tmp_path) as made:
        yield made


def _labelled(docker: SuiteDocker, job: str) -> list[str]:
    containers = docker.output("ps", "--all", "--quiet", "--filter", f"label=aiptrain.job={job}").split()
    networks = docker.output("network", "ls", "--quiet", "--filter", f"label=aiptrain.job={job}").split()
    return containers + networks


def test_an_engine_that_goes_away_is_named_and_its_leftovers_go_when_it_answers_again(
    docker: SuiteDocker, images: SuiteImages, relay: SocketRelay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIPTRAIN_HOME", str(tmp_path / "home"))
    replica = ReplicaContainer("master-replica-0",
                               ContainerCommand(images["shell"], None, ("echo started; sleep 600",)))
    launcher = ContainerLauncher(find_engine(), [replica], job_token="enginelost", run_token="enginelost/run")
    launcher.open()
    try:
        process = launcher.start("master-replica-0", replica.command, {}, tmp_path)
        assert isinstance(process, ContainerProcess)
        assert process.stdout.readline().strip() == b"started"
        relay.cut()
        process.popen.wait(timeout=60)  # the command line gives up on the engine; the container runs on
        returncode = process.reap()
        assert returncode != 0
        reason = process.exit_reason(returncode)
        assert reason is not None and "Docker stopped answering" in reason, reason
        assert _labelled(docker, "enginelost")  # still on the daemon, unread
    finally:
        launcher.close()  # cannot reach the engine: what is left is written down instead
    assert list(HomeLayout.of().container_leftovers.iterdir())
    relay.restore()
    forget_engines()
    with ContainerLauncher(find_engine(), [replica], job_token="nextjob", run_token="nextjob/run"):
        pass  # the next set on the engine sweeps what the job left
    assert _labelled(docker, "enginelost") == []
    assert list(HomeLayout.of().container_leftovers.iterdir()) == []
