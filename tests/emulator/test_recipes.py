"""The client recipes of the manual, run as written against a real emulator.

Each test takes a page's Python block, changes only what differs on this machine (the port the
emulator got, where its token is), runs it, and checks what it did.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import pytest

from tests.docs.manual import DOCS, code_block
from tests.fixtures.emulator import TERMINAL, Emulator, wait_until


def run_block(code: str, tmp_path: Path) -> dict[str, object]:
    script = tmp_path / "recipe.py"
    script.write_text(code)
    return runpy.run_path(str(script))


def test_the_googleapiclient_recipe(emulator: Emulator, trainer_sdist: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    emulator.stage(trainer_sdist, "gs://ci-bucket/packages/trainer-0.1.0.tar.gz")
    code = code_block(DOCS / "emulator-ci.md", "## `googleapiclient` against the emulator", "python")
    token_file = emulator.home / "emulator" / "tokens" / str(emulator.port)
    code = code.replace('(Path.home() / ".aiptrain/_emulator/tokens/8080")', f"Path({str(token_file)!r})")
    code = code.replace("127.0.0.1:8080", f"127.0.0.1:{emulator.port}")
    assert str(token_file) in code and str(emulator.port) in code, "the recipe changed: update this test"
    run_block(code, tmp_path)
    assert capsys.readouterr().out.strip() in ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED")
    engine = emulator.engine()

    def ended() -> Any:
        job = engine.get("ci-project", "api_job_1")
        return job if job.state.value in TERMINAL else None

    assert wait_until(ended).state.value == "SUCCEEDED"


def test_the_airflow_recipe_client(emulator: Emulator, trainer_sdist: Path) -> None:
    """Airflow cannot share the project's environment (docs/emulator-ci.md): the recipe's hook's
    client, built by its own `get_conn` line, makes the calls MLEngineHook makes."""
    from google.oauth2.credentials import Credentials
    from googleapiclient import discovery

    emulator.stage(trainer_sdist, "gs://ci-bucket/packages/trainer-0.1.0.tar.gz")
    code = code_block(DOCS / "emulator-ci.md", "## Airflow's MLEngine operators against the emulator", "python")
    built = re.search(r"return (discovery\.build\(.*?\))\n", code, re.DOTALL)
    assert built is not None, "the recipe's get_conn changed: update this test"
    token = emulator.token or ""
    ml = eval(built.group(1), {"discovery": discovery, "Credentials": Credentials, "token": token,
                               "EMULATOR": emulator.url})
    # The body MLEngineStartTrainingJobOperator builds from the recipe's arguments.
    body = {"jobId": "airflow_job_1", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "packageUris": ["gs://ci-bucket/packages/trainer-0.1.0.tar.gz"],
        "pythonModule": "trainer.task", "args": ["--lines", "2"], "runtimeVersion": "2.11", "pythonVersion": "3.7"}}
    for argument in ('job_id="airflow_job_1"', 'runtime_version="2.11"', 'training_args=["--lines", "2"]'):
        assert argument in code, "the recipe's operator changed: update the body above"
    jobs = ml.projects().jobs()
    created = jobs.create(parent="projects/ci-project", body=body).execute()
    assert created["jobId"] == "airflow_job_1"

    def ended() -> dict[str, object] | None:
        job: dict[str, object] = jobs.get(name="projects/ci-project/jobs/airflow_job_1").execute()
        return job if job["state"] in TERMINAL else None

    assert wait_until(ended)["state"] == "SUCCEEDED"
