"""The client recipes of the manual, run as written against a real emulator.

Each test takes a page's Python block, runs it as written in a process whose environment is
`aiptrain local env`'s (the clients take no endpoint and no credentials), and checks what it did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.docs.manual import DOCS, code_block
from tests.emulator.proxy_clients import run_python
from tests.fixtures.emulator import TERMINAL, Emulator, wait_until


def test_the_googleapiclient_recipe(emulator: Emulator, trainer_sdist: Path) -> None:
    """docs/clients/googleapiclient.md's code, as written, with only `aiptrain local env`'s environment."""
    emulator.stage(trainer_sdist, "gs://ci-bucket/packages/trainer-0.1.0.tar.gz")
    code = code_block(DOCS / "clients" / "googleapiclient.md", "where `submit.py` is the code that ships", "python")
    assert "client_options" not in code and "Credentials" not in code
    state = run_python(emulator, code.replace('print(jobs.get(', 'import json; print(json.dumps(jobs.get(')
                       .replace('["state"])', '["state"]))'))
    assert state in ("QUEUED", "PREPARING", "RUNNING", "SUCCEEDED")
    engine = emulator.engine()

    def ended() -> Any:
        job = engine.get("ci-project", "api_job_1")
        return job if job.state.value in TERMINAL else None

    assert wait_until(ended).state.value == "SUCCEEDED"


def test_the_airflow_recipe_client(emulator: Emulator, trainer_sdist: Path) -> None:
    """Airflow cannot share the project's environment (docs/emulator-ci.md): the client its unchanged
    `MLEngineHook.get_conn` builds (`discovery.build("ml", "v1")` with the application default
    credentials), in `aiptrain local env`'s environment, makes the calls MLEngineHook makes."""
    emulator.stage(trainer_sdist, "gs://ci-bucket/packages/trainer-0.1.0.tar.gz")
    code = code_block(DOCS / "emulator-ci.md", "## Airflow's MLEngine operators against the emulator", "python")
    assert "class " not in code and "discovery" not in code, "the recipe subclasses the hook again"
    for argument in ('job_id="airflow_job_1"', 'runtime_version="2.11"', 'training_args=["--lines", "2"]'):
        assert argument in code, "the recipe's operator changed: update the body below"
    # The body MLEngineStartTrainingJobOperator builds from the recipe's arguments.
    body = {"jobId": "airflow_job_1", "trainingInput": {
        "scaleTier": "BASIC", "region": "us-central1", "packageUris": ["gs://ci-bucket/packages/trainer-0.1.0.tar.gz"],
        "pythonModule": "trainer.task", "args": ["--lines", "2"], "runtimeVersion": "2.11", "pythonVersion": "3.7"}}
    answer = run_python(emulator, """
        import json, sys, time
        import google.auth
        import google_auth_httplib2, httplib2
        from googleapiclient import discovery
        credentials, _ = google.auth.default()
        authed = google_auth_httplib2.AuthorizedHttp(credentials, http=httplib2.Http())
        jobs = discovery.build("ml", "v1", http=authed, cache_discovery=False).projects().jobs()
        jobs.create(parent="projects/ci-project", body=json.loads(sys.argv[1])).execute()
        for _ in range(600):
            job = jobs.get(name="projects/ci-project/jobs/airflow_job_1").execute()
            if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            time.sleep(0.5)
        print(json.dumps(job["state"]))
    """, json.dumps(body))
    assert answer == "SUCCEEDED"
