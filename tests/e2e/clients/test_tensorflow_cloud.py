"""tensorflow-cloud 0.1.16, unchanged, as `tfc.run` drives the service once its image is built
(docs/clients/tensorflow-cloud.md's code): `deploy_job` (`ml.googleapis.com`, `scaleTier: "custom"`,
a zero-count accelerator for a CPU machine) and `wait_for_aip_training_job_completion`, with
nothing but `aiptrain local env`'s environment, on an image built on the suite's Docker daemon."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.clients.conftest import ProxiedEmulator, local_env, page_code
from tests.fixtures.client_venvs import TENSORFLOW_CLOUD, BuiltVenv, ensure_venv
from tests.fixtures.containers import SuiteDocker, SuiteImages
from tests.fixtures.emulator import running_emulator

pytestmark = [pytest.mark.containers, pytest.mark.slow]


@pytest.fixture(scope="module")
def venv() -> BuiltVenv:
    return ensure_venv(TENSORFLOW_CLOUD)


@pytest.fixture
def on_docker(tmp_path: Path, docker: SuiteDocker) -> Iterator[ProxiedEmulator]:
    env = {"DOCKER_HOST": docker.host, "AIPTRAIN_CONTAINER_ENGINE": "docker"}
    with running_emulator(tmp_path / "home", env=env) as server:
        yield ProxiedEmulator(server, local_env(server))


def run_page_code(venv: BuiltVenv, proxied: ProxiedEmulator, tmp_path: Path, image: str,
                  script: str) -> tuple[str, str]:
    """The page's code with the suite's image (`sh -c SCRIPT`) for the page's; (job ID, its verdict)."""
    code = page_code("tensorflow-cloud.md", "submit it as `tfc.run` does", "python")
    assert '"trainer:latest"' in code and '["--steps", "5"]' in code, "the page changed: update this test"
    code = code.replace('"trainer:latest"', repr(image)).replace('["--steps", "5"]', repr([script]))
    (tmp_path / "submit.py").write_text(code)
    # tensorflow-cloud keeps its telemetry consent under HOME: a HOME of the test's own.
    done = venv.run(["submit.py"], {**proxied.env, "HOME": str(tmp_path)}, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    job_id, verdict = done.stdout.strip().splitlines()[-1].split()
    return job_id, verdict


def test_deploy_job_and_wait_succeed(venv: BuiltVenv, on_docker: ProxiedEmulator, images: SuiteImages,
                                     tmp_path: Path) -> None:
    job_id, verdict = run_page_code(venv, on_docker, tmp_path, images["shell"], "echo trained by tensorflow-cloud")
    assert verdict == "SUCCEEDED"
    engine = on_docker.server.engine()
    project = on_docker.env["GOOGLE_CLOUD_PROJECT"]  # tensorflow-cloud submits to the default project
    job = engine.get(project, job_id)
    assert job.state == "SUCCEEDED"
    ti = job.to_api()["trainingInput"]
    # What it sent, as the service kept it: the canonical tier, and no accelerator for a CPU machine.
    assert ti["scaleTier"] == "CUSTOM" and ti["masterType"] == "n1-standard-4"
    assert "acceleratorConfig" not in ti["masterConfig"]
    assert "trained by tensorflow-cloud" in [entry.message for entry in engine.logs(project, job_id)]


def test_a_failing_image_is_a_failed_job(venv: BuiltVenv, on_docker: ProxiedEmulator, images: SuiteImages,
                                         tmp_path: Path) -> None:
    job_id, verdict = run_page_code(venv, on_docker, tmp_path, images["shell"], "echo boom >&2; exit 3")
    assert verdict == "FAILED"
    job = on_docker.server.engine().get(on_docker.env["GOOGLE_CLOUD_PROJECT"], job_id)
    assert job.state == "FAILED"
    assert job.error_message.startswith("The replica master 0 exited with a non-zero status of 3. boom")
