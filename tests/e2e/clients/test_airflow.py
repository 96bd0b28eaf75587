"""Airflow 2.10 with apache-airflow-providers-google 14.1.0, unchanged: docs/clients/airflow.md's DAG of
one `MLEngineStartTrainingJobOperator`, run by `dag.test()` with no hook subclass and no endpoint,
given `aiptrain local env`'s environment and the page's connection setting (plus Airflow's home)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.clients.conftest import PACKAGE_URI, PROJECT, ProxiedEmulator, page_code, without_the_eval
from tests.fixtures.client_venvs import AIRFLOW, BuiltVenv, ensure_venv

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def venv() -> BuiltVenv:
    return ensure_venv(AIRFLOW)


def page_settings() -> dict[str, str]:
    """The page's `export NAME=VALUE` lines (its eval line is the test's `local env`)."""
    shell = without_the_eval(page_code("airflow.md", "It needs two things", "bash"))
    exports = [line.split("#", 1)[0].strip().removeprefix("export ") for line in shell.splitlines()]
    return dict(export.split("=", 1) for export in exports if export)


def test_the_pages_dag_runs_a_job_to_success_in_dag_test(venv: BuiltVenv, proxied_emulator: ProxiedEmulator,
                                                         tmp_path: Path) -> None:
    dag = page_code("airflow.md", "A DAG of one training step", "python")
    assert PACKAGE_URI in dag and f'project_id="{PROJECT}"' in dag, "the page changed: update this test"
    (tmp_path / "dag_test.py").write_text(dag)
    settings = page_settings()
    assert settings == {"AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": "google-cloud-platform://"}
    env = {**proxied_emulator.env, **settings, "AIRFLOW_HOME": str(tmp_path / "airflow"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrated = venv.run(["-m", "airflow", "db", "migrate"], env, timeout=600, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr[-4000:]
    done = venv.run(["dag_test.py"], env, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert done.stdout.strip().splitlines()[-1] == "success", (done.stdout + done.stderr)[-6000:]
    job = proxied_emulator.server.engine().get(PROJECT, "airflow_job_1")
    assert job.state == "SUCCEEDED"
    assert job.to_api()["trainingInput"]["packageUris"] == [PACKAGE_URI]
