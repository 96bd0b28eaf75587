"""tensorflow-cloud 0.1.16, unchanged, as `tfc.run` drives the service once its image is built:
`deploy_job` (`ml.googleapis.com`, `scaleTier: "custom"`, a zero-count accelerator for a CPU
machine) and `wait_for_aip_training_job_completion`, with nothing but `aiptrain local env`'s
environment, on an image built on the suite's Docker daemon."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.clients.conftest import PROJECT, ProxiedEmulator, local_env
from tests.fixtures.client_venvs import TENSORFLOW_CLOUD, BuiltVenv, ensure_venv
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.emulator import running_emulator

pytestmark = [pytest.mark.containers, pytest.mark.slow]

PROGRAM = Path(__file__).with_name("programs") / "tensorflow_cloud_job.py"


@pytest.fixture(scope="module")
def venv() -> BuiltVenv:
    return ensure_venv(TENSORFLOW_CLOUD)


@pytest.fixture
def on_docker(tmp_path: Path, docker: SuiteDocker) -> Iterator[ProxiedEmulator]:
    env = {"DOCKER_HOST": docker.host, "AIPTRAIN_CONTAINER_ENGINE": "docker"}
    with running_emulator(tmp_path / "home", env=env) as server:
        yield ProxiedEmulator(server, local_env(server))


def run_job(venv: BuiltVenv, proxied: ProxiedEmulator, tmp_path: Path, image: str, script: str) -> dict[str, object]:
    # tensorflow-cloud keeps its telemetry consent under HOME: a HOME of the test's own.
    env = {**proxied.env, "HOME": str(tmp_path)}
    done = venv.run([str(PROGRAM), image, script], env, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_deploy_job_and_wait_succeed(venv: BuiltVenv, on_docker: ProxiedEmulator, images: SuiteImages,
                                     tmp_path: Path) -> None:
    result = run_job(venv, on_docker, tmp_path, images["shell"], "echo trained by tensorflow-cloud")
    assert result["succeeded"] is True
    job = on_docker.server.engine().get(PROJECT, str(result["job_id"]))
    assert job.state == "SUCCEEDED"
    ti = job.to_api()["trainingInput"]
    # What it sent, as the service kept it: the canonical tier, and no accelerator for a CPU machine.
    assert ti["scaleTier"] == "CUSTOM" and ti["masterType"] == "n1-standard-4"
    assert "acceleratorConfig" not in ti["masterConfig"]
    said = [entry.message for entry in on_docker.server.engine().logs(PROJECT, str(result["job_id"]))]
    assert "trained by tensorflow-cloud" in said


def test_a_failing_image_is_a_failed_job(venv: BuiltVenv, on_docker: ProxiedEmulator, images: SuiteImages,
                                         tmp_path: Path) -> None:
    result = run_job(venv, on_docker, tmp_path, images["shell"], "echo boom >&2; exit 3")
    assert result["succeeded"] is False
    job = on_docker.server.engine().get(PROJECT, str(result["job_id"]))
    assert job.state == "FAILED"
    assert job.error_message.startswith("The replica master 0 exited with a non-zero status of 3. boom")
