"""Real TensorFlow clusters through the local backend: the TF_CONFIG works for TF's own strategies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiptrain._backends.local.job_engine import LocalJobEngine
from aiptrain._job.spec import JobState
from tests.fixtures.local_jobs import (
    PROJECT,
    local_dir,
    make_job,
    token_processes,
    training_input,
    wait_for_end,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_multi_worker_mirrored_strategy(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("mwms", training_input(package_uri, "tfcfg.mwms", job_dir="gs://out/mwms",
                                                           workers=1)))
    done = wait_for_end(engine, "mwms", timeout=300)
    assert done.state == JobState.SUCCEEDED, done.error_message
    result = json.loads((local_dir(home, "gs://out/mwms") / "mwms.json").read_text())
    assert result["replicas_in_sync"] == 2
    assert result["losses"][-1] < result["losses"][0]
    assert wait_until(lambda: not token_processes(engine, "mwms"), 15, "every process to end")


def test_parameter_server_strategy(engine: LocalJobEngine, home: Path, package_uri: str) -> None:
    engine.submit(PROJECT, make_job("psjob", training_input(package_uri, "tfcfg.ps", job_dir="gs://out/ps",
                                                            workers=2, parameter_servers=1)))
    done = wait_for_end(engine, "psjob", timeout=300)
    assert done.state == JobState.SUCCEEDED, done.error_message
    result = json.loads((local_dir(home, "gs://out/ps") / "ps.json").read_text())
    assert result == {"counter": 6.0, "workers": 2, "ps": 1}
    # The servers never exit by themselves: the runner stopped them when the chief was done.
    service = [e.message for e in engine.logs(PROJECT, "psjob", task_name="service")]
    stopped = [message for message in service if message.startswith("Stopping")]
    assert stopped and "ps-replica-0" in stopped[0] and "worker-replica-1" in stopped[0]
    assert wait_until(lambda: not token_processes(engine, "psjob"), 15, "every process to end")
